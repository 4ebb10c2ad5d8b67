package room

import (
	"net/url"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/errclass"
)

// Room metadata: what a room list shows and filters by. CreateRoom sets
// it, SetRoomMetadata replaces it whole, a reopen keeps it.
const (
	VisibilityPublic   = "public"   // in the app's room list (the default)
	VisibilityUnlisted = "unlisted" // reachable by id, listed to its owner only
	MaxTags            = 10
	MaxTagLen          = 32 // bytes
	MaxCoverURLLen     = 512
)

// CmdSetRoomMetadata replaces a room's metadata.
const CmdSetRoomMetadata = "SetRoomMetadata"

// Meta is a room's metadata. Tags are sorted and unique; Visibility is ""
// for public (so a room without metadata stores nothing).
type Meta struct {
	Category   string   `json:"category,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	CoverURL   string   `json:"cover_url,omitempty"`
	Visibility string   `json:"visibility,omitempty"`
}

func (m Meta) zero() bool {
	return m.Category == "" && m.Tags == nil && m.CoverURL == "" && m.Visibility == ""
}

func (m Meta) equal(o Meta) bool {
	return m.Category == o.Category && slices.Equal(m.Tags, o.Tags) && m.CoverURL == o.CoverURL && m.Visibility == o.Visibility
}

// Metadata returns the room's metadata (read only).
func (s State) Metadata() Meta { return s.x().Meta }

// VisibilityOf names a stored visibility ("" is public).
func VisibilityOf(v string) string {
	if v == "" {
		return VisibilityPublic
	}
	return v
}

// metaOf is cmd's metadata in its stored form: tags sorted and unique,
// public as "".
func metaOf(cmd Command) Meta {
	tags := slices.Clone(cmd.Tags)
	slices.Sort(tags)
	tags = slices.Compact(tags)
	if len(tags) == 0 {
		tags = nil
	}
	v := cmd.Visibility
	if v == VisibilityPublic {
		v = ""
	}
	return Meta{Category: cmd.Category, Tags: tags, CoverURL: cmd.CoverURL, Visibility: v}
}

// checkMeta: a category is an id (it keys lists), tags are short
// one-line labels (counted once each: the stored form keeps one of a
// repeated tag), the cover is an https URL to a host, without
// credentials or spaces.
func checkMeta(cmd Command) error {
	if cmd.Category != "" {
		if err := checkID("category", cmd.Category); err != nil {
			return err
		}
	}
	if n := len(metaOf(cmd).Tags); n > MaxTags {
		return errclass.Invalidf("at most %d distinct tags, got %d", MaxTags, n)
	}
	for _, t := range cmd.Tags {
		if err := checkName("tags", t); err != nil {
			return err
		}
		if len(t) > MaxTagLen {
			return errclass.Invalidf("tags: %q is longer than %d bytes", t, MaxTagLen)
		}
	}
	if c := cmd.CoverURL; c != "" {
		if len(c) > MaxCoverURLLen {
			return errclass.Invalidf("cover_url is longer than %d bytes", MaxCoverURLLen)
		}
		if err := checkCoverURL(c); err != nil {
			return err
		}
	}
	switch cmd.Visibility {
	case "", VisibilityPublic, VisibilityUnlisted:
	default:
		return errclass.Invalidf("visibility must be %q or %q, got %q", VisibilityPublic, VisibilityUnlisted, cmd.Visibility)
	}
	return nil
}

// checkCoverURL: clients load the cover as it is, so it must name a host
// over https (a scheme in any case), carry no user:password (which
// clients would send, or show) and no space or control character.
func checkCoverURL(c string) error {
	if strings.ContainsFunc(c, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errclass.Invalidf("cover_url has a space or a control character")
	}
	u, err := url.Parse(c)
	switch {
	case err != nil:
		return errclass.Invalidf("cover_url is not a URL")
	case !strings.EqualFold(u.Scheme, "https"):
		return errclass.Invalidf("cover_url must be an https URL")
	case u.User != nil:
		return errclass.Invalidf("cover_url must not carry credentials")
	case u.Hostname() == "":
		return errclass.Invalidf("cover_url has no host")
	}
	return nil
}

// decideSetMeta: the owner or an admin in the room; the same metadata is
// a no-op.
func decideSetMeta(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	m := metaOf(cmd)
	if m.equal(s.Metadata()) {
		return nil, nil
	}
	return []Event{RoomMetadataChanged{Meta: m, OperatorUserID: cmd.UserID}}, nil
}

// RoomMetadataChanged carries the whole metadata after the change.
type RoomMetadataChanged struct {
	Meta
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomMetadataChanged) EventType() string { return TypeRoomMetadataChanged }
func (e RoomMetadataChanged) apply(s *State)  { s.setMeta(e.Meta) }

func (s *State) setMeta(m Meta) {
	if m.zero() && s.Extra == nil {
		return
	}
	m.Tags = slices.Clone(m.Tags)
	s.mx().Meta = m
}
