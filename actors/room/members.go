package room

import (
	"encoding/base64"
	"maps"
	"slices"

	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// Members pages of GetRoom.
const (
	DefaultMembersPageSize = 100
	MaxMembersPageSize     = 1000
)

// MembersPage is a checked GetRoom page request: up to Size members whose
// ids sort after After ("" = from the first).
type MembersPage struct {
	After string
	Size  int
}

// ParseMembersPage checks a GetRoom request's page_size and page_token.
// A token is the last user id of the previous page (base64url), so a page
// does not depend on the activation that served the one before it.
func ParseMembersPage(r *v1.GetRoomRequest) (MembersPage, error) {
	p := MembersPage{Size: int(r.GetPageSize())}
	switch {
	case p.Size < 0 || p.Size > MaxMembersPageSize:
		return MembersPage{}, invalidf("page_size must be between 0 (default %d) and %d, got %d", DefaultMembersPageSize, MaxMembersPageSize, p.Size)
	case p.Size == 0:
		p.Size = DefaultMembersPageSize
	}
	if tok := r.GetPageToken(); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || checkID("page_token", string(b)) != nil {
			return MembersPage{}, invalidf("page_token is not one this server returned")
		}
		p.After = string(b)
	}
	return p, nil
}

func membersToken(lastUserID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastUserID))
}

// memberIndex is a room's member ids in order, for GetRoom's pages. It is
// built by the first page asked for in an activation and then kept in step
// with each committed command (one binary search per member change), so
// neither a command nor a page sorts the member list, and a room nobody
// pages through holds no second copy of it.
type memberIndex struct {
	ids   []string
	built bool
}

// reset forgets the index; the next page rebuilds it (a reload).
func (x *memberIndex) reset() { *x = memberIndex{} }

// apply follows a committed command's member changes; s is the state
// after it.
func (x *memberIndex) apply(s State, events []Event) {
	if !x.built {
		return
	}
	for _, ev := range events {
		switch e := ev.(type) {
		case RoomUserJoined:
			x.follow(s, e.UserID)
		case RoomUserLeft:
			x.follow(s, e.UserID)
		case RoomUserKicked:
			x.follow(s, e.TargetUserID)
		case RoomClosed:
			x.ids = nil
		}
	}
}

// follow puts user in the index or takes them out as the state says.
func (x *memberIndex) follow(s State, user string) {
	i, found := slices.BinarySearch(x.ids, user)
	switch member := s.IsMember(user); {
	case member && !found:
		x.ids = slices.Insert(x.ids, i, user)
	case !member && found:
		x.ids = slices.Delete(x.ids, i, i+1)
	}
}

// page returns up to p.Size member ids after p.After and the token of the
// next page ("" after the last).
func (x *memberIndex) page(s State, p MembersPage) (ids []string, next string) {
	// A count that disagrees with the state means an event kind that moves
	// members is missing from apply: rebuild rather than serve a wrong page.
	if !x.built || len(x.ids) != len(s.Members) {
		x.ids, x.built = slices.Sorted(maps.Keys(s.Members)), true
	}
	from, found := slices.BinarySearch(x.ids, p.After)
	if found {
		from++
	}
	if p.After == "" {
		from = 0
	}
	to := min(from+p.Size, len(x.ids))
	ids = slices.Clone(x.ids[from:to])
	if to < len(x.ids) {
		next = membersToken(x.ids[to-1])
	}
	return ids, next
}
