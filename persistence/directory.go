package persistence

import (
	"context"
	"time"
)

// The room directory is a read model beside the room grains: who was seen
// where and when (presence), which room a user is in (user → room), and
// which rooms are live and how hot (the heat ranking per app). The room
// grains are its only writers and their state is the truth: every entry can
// be rebuilt from room state (SyncRoom), so a directory outage never fails a
// room command and a lost entry is repaired on the room's next refresh.
//
// Times are unix milliseconds passed in by the caller; the backends use
// their own clock only to expire entries (the presence entry after the
// presence TTL, a room entry after the room TTL, both refreshed by writes).
// Ids are the room package's: non-empty printable ASCII without ':' or '/'.

// Presence is a user's newest heartbeat in a room.
type Presence struct {
	UserID     string
	LastSeenMs int64
}

// UserRoom is the room a user is in within an app.
type UserRoom struct {
	AppCode string
	UserID  string
	RoomID  string
	// JoinedAtMs is the time of the join that set the entry: the newest
	// join wins a conflict (see ClaimUserRoom).
	JoinedAtMs int64
	// LastSeenMs is the newest heartbeat in that room (0: none recorded);
	// Online says the TTL'd presence entry is still there.
	LastSeenMs int64
	Online     bool
}

// RoomEntry is a live room as the directory lists it.
type RoomEntry struct {
	AppCode     string
	RoomID      string
	Name        string
	OwnerUserID string
	MemberCount int64
	Heat        int64
	// Rank is the 1-based position in the app's heat ranking (heat
	// descending, then room_id ascending); 0 = not ranked. Set on reads
	// only.
	Rank        int64
	UpdatedAtMs int64
	// Meta is the room's metadata, what lists filter by; nil for none
	// (public, no category). Behind a pointer: most rooms have none, and
	// the memdb row stays in its size class.
	Meta *RoomMeta
}

// RoomMeta is a room's metadata (room.Meta). Visibility "" is public.
type RoomMeta struct {
	Category   string
	Tags       []string
	CoverURL   string
	Visibility string
}

// MetaOf returns e's metadata, the zero value for none.
func (e RoomEntry) MetaOf() RoomMeta {
	if e.Meta == nil {
		return RoomMeta{}
	}
	return *e.Meta
}

// RankChange is a room's rank just before and just after an UpdateRoom,
// read in the same atomic step; 0 = not ranked.
type RankChange struct {
	Prev int64
	Rank int64
}

// RoomFilter selects rooms of a listing; zero fields match anything but
// Visibility, which is matched as stored ("" = public) unless AnyVisibility.
type RoomFilter struct {
	Category      string
	Owner         string
	Visibility    string
	AnyVisibility bool
}

// Match reports whether e is selected.
func (f RoomFilter) Match(e RoomEntry) bool {
	m := e.MetaOf()
	return (f.Category == "" || m.Category == f.Category) && (f.Owner == "" || e.OwnerUserID == f.Owner) &&
		(f.AnyVisibility || m.Visibility == f.Visibility)
}

// RoomPage is one page of ListRooms.
type RoomPage struct {
	Rooms []RoomEntry
	// Total is the size of the app's ranking. Entries of rooms that
	// stopped without unlisting count until a reader purges them.
	Total int64
}

// Claim is the outcome of ClaimUserRoom for one member.
type Claim struct {
	UserID string
	// Won: the entry names the claiming room now. Other is then the room
	// the entry named before ("" if none or the same room), which must let
	// the user go; when !Won, Other is the room holding a newer join, and
	// the claiming room must let the user go.
	Won   bool
	Other string
}

// RoomSync is a room's state as SyncRoom writes it.
type RoomSync struct {
	Entry RoomEntry
	// Members maps each member to the time they joined (State.Members).
	Members map[string]int64
	NowMs   int64
}

// Directory is the room directory. Implementations: persistence/redis
// (production) and persistence/memdb (dev mode); both pass
// storetest.RunDirectory. Errors wrap ErrUnavailable when the backend is
// unreachable, ErrNotFound where a method says so.
type Directory interface {
	// Heartbeat records that userID was seen in key at nowMs: it
	// refreshes the TTL'd presence entry and the user's score in the
	// room's presence set (a score never moves back in time).
	Heartbeat(ctx context.Context, key RoomKey, userID string, nowMs int64) error
	// StalePresence returns up to limit users of key whose last heartbeat
	// is at or before beforeMs, oldest first. An expired presence entry
	// does not hide a user here: those are the stalest.
	StalePresence(ctx context.Context, key RoomKey, beforeMs int64, limit int) ([]Presence, error)
	// StalePresenceRooms is StalePresence for many rooms in one call (one
	// round trip on Redis): out[i] holds keys[i]'s, up to limit each. The
	// presence worker reads a node's rooms this way, not one call each.
	StalePresenceRooms(ctx context.Context, keys []RoomKey, beforeMs int64, limit int) ([][]Presence, error)
	// SetUserRoom records a live join of userID to key at joinedAtMs and
	// seeds their presence at joinedAtMs. The swap is atomic: of any
	// number of concurrent joins each gets the room the entry named just
	// before it, so every room but the last one set is returned to
	// exactly one caller. prev is the entry replaced (RoomID and
	// JoinedAtMs; the zero value when there was none or it named key
	// itself): its join time lets the caller tell whether it displaced an
	// older join or a newer one that landed first.
	SetUserRoom(ctx context.Context, key RoomKey, userID string, joinedAtMs int64) (prev UserRoom, err error)
	// ClearUserRoom removes userID's presence in key and deletes their
	// user → room entry only if it still names key (compare-and-delete),
	// so a late leave never clears the entry of the room they moved to.
	ClearUserRoom(ctx context.Context, key RoomKey, userID string) error
	// UserRoom returns the room userID is in, or ErrNotFound.
	UserRoom(ctx context.Context, appCode, userID string) (UserRoom, error)
	// UpdateRoom upserts a live room's entry and its heat in the app's
	// ranking (refreshing the room TTL) and returns its rank before and
	// after, read atomically with the write.
	UpdateRoom(ctx context.Context, e RoomEntry) (RankChange, error)
	// RemoveRoom unlists key (a closed or passivated room). Presence and
	// user → room entries are left to ClearUserRoom.
	RemoveRoom(ctx context.Context, key RoomKey) error
	// ListRooms returns live rooms of appCode by heat, descending, from
	// offset (0-based), at most limit.
	ListRooms(ctx context.Context, appCode string, offset, limit int) (RoomPage, error)
	// SyncRoom rebuilds the room's part of the directory from its state:
	// UpdateRoom(s.Entry); users in the presence set who are not members
	// are cleared as by ClearUserRoom; members without presence are seeded
	// at NowMs (an existing last-seen is kept); each member's entry is
	// claimed as by ClaimUserRoom. It returns the claims that involve
	// another room (Other != ""), sorted by user.
	SyncRoom(ctx context.Context, s RoomSync) (RankChange, []Claim, error)
	// ClaimUserRoom is the repair of one user → room entry: absent, it is
	// set to key; naming key, it is kept; naming another room whose join
	// is older than joinedAtMs, it is set to key (Won, Other = that
	// room); naming a room with a join as new or newer, it is kept (!Won,
	// Other = that room). Atomic against concurrent joins and claims.
	ClaimUserRoom(ctx context.Context, key RoomKey, userID string, joinedAtMs int64) (Claim, error)
}

// RankingSnapshots are frozen copies of an app's heat ranking, one per
// window of a few seconds, so a walk through ListRooms pages reads one
// order while heat moves underneath: no room twice, none of those ranked
// when the walk began left out. The entries' fields (heat, members,
// name) are read live; the order and the ranks are the snapshot's.
type RankingSnapshots interface {
	// SnapshotRanking returns the id of the app's current snapshot,
	// copying the ranking when the window has none yet. It lives ttl
	// after its last read.
	SnapshotRanking(ctx context.Context, appCode string, window, ttl time.Duration) (string, error)
	// ListSnapshot reads limit entries from offset of snapshot id and
	// keeps it ttl longer; a room that stopped since is left out (the
	// page is then shorter). Total is the snapshot's size. ErrNotFound
	// when the snapshot expired.
	ListSnapshot(ctx context.Context, appCode, id string, offset, limit int, ttl time.Duration) (RoomPage, error)
}
