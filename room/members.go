package room

import (
	"encoding/base64"
	"maps"
	"slices"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
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
	return parsePage(r.GetPageSize(), r.GetPageToken())
}

// ParseBansPage checks a ListBans request's page (as GetRoom's).
func ParseBansPage(r *v1.ListBansRequest) (MembersPage, error) {
	return parsePage(r.GetPageSize(), r.GetPageToken())
}

func parsePage(size int32, tok string) (MembersPage, error) {
	p := MembersPage{Size: int(size)}
	switch {
	case p.Size < 0 || p.Size > MaxMembersPageSize:
		return MembersPage{}, errclass.Invalidf("page_size must be between 0 (default %d) and %d, got %d", DefaultMembersPageSize, MaxMembersPageSize, p.Size)
	case p.Size == 0:
		p.Size = DefaultMembersPageSize
	}
	if tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || checkID("page_token", string(b)) != nil {
			return MembersPage{}, errclass.Invalidf("page_token is not one this server returned")
		}
		p.After = string(b)
	}
	return p, nil
}

func MembersToken(lastUserID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastUserID))
}

// MemberIndex is a room's member ids in order, for GetRoom's pages. It is
// built by the first page asked for in an activation and then kept in step
// with each committed command (one binary search per member change), so
// neither a command nor a page sorts the member list, and a room nobody
// pages through holds no second copy of it.
type MemberIndex struct {
	ids []string // nil: not built (built and empty is a non-nil empty slice)
}

// reset forgets the index; the next page rebuilds it (a reload).
func (x *MemberIndex) Reset() { *x = MemberIndex{} }

// apply follows a committed command's member changes; s is the state
// after it.
func (x *MemberIndex) Apply(s State, events []Event) {
	if x.ids == nil {
		return
	}
	for _, ev := range events {
		switch e := ev.(type) {
		case RoomUserJoined:
			x.Follow(s, e.UserID)
		case RoomUserLeft:
			x.Follow(s, e.UserID)
		case RoomUserKicked:
			x.Follow(s, e.TargetUserID)
		case RoomClosed:
			x.ids = nil
		}
	}
}

// follow puts user in the index or takes them out as the state says.
func (x *MemberIndex) Follow(s State, user string) {
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
func (x *MemberIndex) Page(s State, p MembersPage) (ids []string, next string) {
	// A count that disagrees with the state means an event kind that moves
	// members is missing from apply: rebuild rather than serve a wrong page.
	if x.ids == nil || len(x.ids) != len(s.Members) {
		if x.ids = slices.Sorted(maps.Keys(s.Members)); x.ids == nil {
			x.ids = []string{}
		}
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
		next = MembersToken(x.ids[to-1])
	}
	return ids, next
}
