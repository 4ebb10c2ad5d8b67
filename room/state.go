package room

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Limits on input. The gRPC layer checks the same limits before a command
// reaches a grain; Decide checks them again so the state machine is safe on
// its own.
const (
	DefaultMicSeats = 8
	MaxMicSeats     = 20
	MaxIDLen        = 64
	MaxNameLen      = 128
	MaxReasonLen    = 256
	MaxAnnouncement = 1024 // bytes
	MaxAdmins       = 20
	MaxGiftCount    = 1_000_000
	MaxBanSeconds   = 365 * 24 * 3600
)

// Room statuses.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// State is one room. The zero State (Exists false) is a room nobody has
// created. Apply and ApplyCommand never change the State they are given;
// the grain changes its own state in place (ApplyInPlace), after the
// command is stored. Empty maps and lists are nil, so two equal rooms are
// equal values.
type State struct {
	AppCode     string           `json:"app_code"`
	RoomID      string           `json:"room_id"`
	Seq         int64            `json:"seq"`
	Exists      bool             `json:"exists"`
	Owner       string           `json:"owner"`
	Name        string           `json:"name"`
	Status      string           `json:"status"`
	Admins      []string         `json:"admins,omitempty"`
	Members     map[string]int64 `json:"members,omitempty"` // user -> joined_at_ms
	Seats       []string         `json:"seats,omitempty"`   // seat -> user ("" = free)
	Bans        map[string]int64 `json:"bans,omitempty"`    // user -> banned until (ms)
	Heat        int64            `json:"heat"`
	CreatedAtMs int64            `json:"created_at_ms"`
	// Added after the first release; omitempty keeps snapshots taken
	// before them decoding to the same state (nil, "").
	Announcement string `json:"announcement,omitempty"`
	MutedSeats   []int  `json:"muted_seats,omitempty"`  // sorted seat indexes
	LockedSeats  []int  `json:"locked_seats,omitempty"` // sorted seat indexes
	// Extra holds what was added after the grain reached its size class
	// (actors/roomgrain/grainsize_test.go): one pointer, nil for a room that
	// uses none of it, so a new field costs an active room nothing.
	Extra *Extra `json:"extra,omitempty"`
}

// Extra is the part of a room's state behind one pointer. Its zero value
// is stored as nil (canonical).
type Extra struct {
	SeatMode string `json:"seat_mode,omitempty"` // "" = SeatModeFree
	// Pending seat requests by user (seatrequest.go).
	Applications map[string]SeatRequest `json:"applications,omitempty"`
	Invitations  map[string]SeatRequest `json:"invitations,omitempty"`
	// Chat mutes: user -> muted until (ms) (moderation.go).
	Mutes map[string]int64 `json:"mutes,omitempty"`
	// Metadata (roommeta.go).
	Meta Meta `json:"meta,omitzero"`
	// Who banned each user of State.Bans and why (moderation.go); a ban
	// written before notes were kept has none.
	BanNotes map[string]BanNote `json:"ban_notes,omitempty"`
	// Who imposed each chat mute of Mutes, with the authority they had
	// (moderation.go): a mute is lifted or changed only with at least
	// that authority, as a ban is (BanNote.Role). A mute without one
	// (imposed before they were recorded) counts as an admin's, the rule
	// it was imposed under.
	MuteBy map[string]Imposer `json:"mute_by,omitempty"`
	// Members' audio presence (audio.go).
	Audio map[string]AudioMark `json:"audio,omitempty"`
	// Members' IM presence (audio.go): Out = logged out or disconnected.
	Online map[string]AudioMark `json:"online,omitempty"`
	// The app's key/value info on the room (custominfo.go).
	CustomInfo map[string]string `json:"custom_info,omitempty"`
	// The room's password verifier (password.go); zero = none.
	Password Verifier `json:"password,omitzero"`
	// The all-mics switch and the seats it muted (allmics.go).
	AllMicsMuted bool  `json:"all_mics_muted,omitempty"`
	MutedByAll   []int `json:"muted_by_all,omitempty"`
	// The running like total and the users' recent like receipts
	// (likes.go).
	Likes        int64                   `json:"likes,omitempty"`
	LikeReceipts map[string]LikeReceipts `json:"like_receipts,omitempty"`
	// The chat-disabled switch (chatdisabled.go).
	ChatDisabled bool `json:"chat_disabled,omitempty"`
	// Contribution ranking (ranking.go).
	Ranks Ranks `json:"ranks,omitzero"`
}

// x returns the extra part to read (the zero value for none).
func (s State) x() Extra {
	if s.Extra == nil {
		return Extra{}
	}
	return *s.Extra
}

// mx returns the extra part to change, made on first use.
func (s *State) mx() *Extra {
	if s.Extra == nil {
		s.Extra = &Extra{}
	}
	return s.Extra
}

func (e *Extra) clone() *Extra {
	if e == nil {
		return nil
	}
	c := *e
	c.Applications = maps.Clone(e.Applications)
	c.Invitations = maps.Clone(e.Invitations)
	c.Mutes = maps.Clone(e.Mutes)
	c.BanNotes = maps.Clone(e.BanNotes)
	c.CustomInfo = maps.Clone(e.CustomInfo)
	c.MuteBy = maps.Clone(e.MuteBy)
	c.Audio = maps.Clone(e.Audio)
	c.Online = maps.Clone(e.Online)
	c.Meta.Tags = slices.Clone(e.Meta.Tags)
	c.MutedByAll = slices.Clone(e.MutedByAll)
	c.LikeReceipts = maps.Clone(e.LikeReceipts)
	c.Ranks = e.Ranks.clone()
	return &c
}

// canonical: empty maps are nil and an all-zero Extra is no Extra.
func (e *Extra) canonical() bool {
	nilIfEmptyMap(&e.Applications)
	nilIfEmptyMap(&e.Invitations)
	nilIfEmptyMap(&e.Mutes)
	nilIfEmptyMap(&e.BanNotes)
	nilIfEmptyMap(&e.CustomInfo)
	nilIfEmptyMap(&e.MuteBy)
	nilIfEmptyMap(&e.Audio)
	nilIfEmptyMap(&e.Online)
	nilIfEmpty(&e.Meta.Tags)
	nilIfEmpty(&e.MutedByAll)
	nilIfEmptyMap(&e.LikeReceipts)
	e.Ranks.canonical()
	return e.SeatMode == "" && e.Applications == nil && e.Invitations == nil && e.Mutes == nil && e.Meta.zero() &&
		e.BanNotes == nil && e.MuteBy == nil && e.CustomInfo == nil && e.Audio == nil && e.Online == nil && !e.Password.set() &&
		!e.AllMicsMuted && e.MutedByAll == nil && e.Likes == 0 && e.LikeReceipts == nil && !e.ChatDisabled && e.Ranks.zero()
}

// Applications returns the pending seat applications by user (read only).
func (s State) Applications() map[string]SeatRequest { return s.x().Applications }

// Invitations returns the pending seat invitations by user (read only).
func (s State) Invitations() map[string]SeatRequest { return s.x().Invitations }

// NewState is the empty state of a room that may not exist yet.
func NewState(appCode, roomID string) State {
	return State{AppCode: appCode, RoomID: roomID}
}

// Clone returns a deep copy.
func (s State) Clone() State {
	s.Admins = slices.Clone(s.Admins)
	s.Members = maps.Clone(s.Members)
	s.Seats = slices.Clone(s.Seats)
	s.Bans = maps.Clone(s.Bans)
	s.MutedSeats = slices.Clone(s.MutedSeats)
	s.LockedSeats = slices.Clone(s.LockedSeats)
	s.Extra = s.Extra.clone()
	return s
}

// IsMember reports whether user is in the room.
func (s State) IsMember(user string) bool {
	_, ok := s.Members[user]
	return ok
}

// IsAdmin reports whether user is the owner or a listed admin.
func (s State) IsAdmin(user string) bool {
	return user == s.Owner || slices.Contains(s.Admins, user)
}

// SeatOf returns the seat user holds, or -1.
func (s State) SeatOf(user string) int {
	return slices.Index(s.Seats, user)
}

// SeatMuted reports whether seat is muted.
func (s State) SeatMuted(seat int) bool { return slices.Contains(s.MutedSeats, seat) }

// SeatLocked reports whether seat is locked.
func (s State) SeatLocked(seat int) bool { return slices.Contains(s.LockedSeats, seat) }

// BannedAt reports whether user is banned at nowMs.
func (s State) BannedAt(user string, nowMs int64) bool {
	until, ok := s.Bans[user]
	return ok && until > nowMs
}

// SortedMembers returns the member ids in order.
func (s State) SortedMembers() []string {
	return slices.Sorted(maps.Keys(s.Members))
}

// Marshal serialises the state for a snapshot.
func (s State) Marshal() ([]byte, error) { return json.Marshal(s) }

// UnmarshalState parses a snapshot. The result is canonical (see
// canonical), so it equals the live state the snapshot was taken from.
func UnmarshalState(b []byte) (State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("decode room snapshot: %w", err)
	}
	s.canonical()
	return s, nil
}

// vacate frees every seat user holds and drops their seat requests and
// presence marks (the member is gone).
func (s *State) vacate(user string) {
	if s.Extra != nil {
		delete(s.Extra.Applications, user)
		delete(s.Extra.Invitations, user)
		delete(s.Extra.Audio, user)
		delete(s.Extra.Online, user)
	}
	for i, u := range s.Seats {
		if u == user {
			s.Seats[i] = ""
		}
	}
}

// canonical makes equal rooms equal values: an empty map or list is nil,
// as it is after a snapshot round trip (the fields are omitempty), so a
// replayed state compares equal to the live one with ==-style checks.
func (s *State) canonical() {
	nilIfEmptyMap(&s.Members)
	nilIfEmptyMap(&s.Bans)
	if s.Extra != nil && s.Extra.canonical() {
		s.Extra = nil
	}
	nilIfEmpty(&s.Admins)
	nilIfEmpty(&s.Seats)
	nilIfEmpty(&s.MutedSeats)
	nilIfEmpty(&s.LockedSeats)
}

func nilIfEmpty[T any](p *[]T) {
	if len(*p) == 0 {
		*p = nil
	}
}

func nilIfEmptyMap[K comparable, V any](p *map[K]V) {
	if len(*p) == 0 {
		*p = nil
	}
}
