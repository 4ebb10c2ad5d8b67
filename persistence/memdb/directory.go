package memdb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// DirectoryOptions tune the dev-mode directory. Zero values take the
// defaults.
type DirectoryOptions struct {
	// PresenceTTL: how long a presence entry counts as online after its
	// newest heartbeat (default directory.presence_ttl's).
	PresenceTTL time.Duration
	// RoomTTL: how long a room stays listed after its newest update
	// (default directory.room_ttl's); rooms refresh well within it.
	RoomTTL time.Duration
	// Clock decides expiry only (default time.Now); every other time is
	// the caller's nowMs.
	Clock func() time.Time
}

// Directory is persistence.Directory in memory, for dev mode and tests:
// maps and ordered sets under one lock, held for the whole of a method, so
// every method is atomic, which is what the Redis directory gets from Lua
// and SET GET. It was a go-memdb database; every join's user and presence
// writes then copied radix paths (12% of a dev join's CPU once the outbox
// was off go-memdb), and nothing here needs go-memdb's
// snapshots or watches. The zero value is not usable; call NewDirectory.
type Directory struct {
	opts   DirectoryOptions
	closed atomic.Bool

	mu sync.RWMutex
	// users is each user's room within an app.
	users map[userKey]userRoomRow
	// presence holds one row per (room, user), and seen the same rows of
	// each room by (last_seen_ms, user_id): StalePresence's oldest-first
	// scan and SyncRoom's walk over a room. A set per room compares two
	// fields, not the room's strings first, and a join or heartbeat (the
	// newest last-seen) lands at its end through the set's path hint. A
	// row is never changed once stored: a heartbeat stores a new one in
	// its place.
	presence map[presenceKey]*presenceRow
	seen     map[persistence.RoomKey]*presenceSet
	// rooms holds the listed rooms; ranks each app's live rooms in ranking
	// order, counted, so a rank is found in O(log² n) rather than by
	// walking the app's rooms (which cost more than the command it
	// followed at 1000 rooms); expiry every room row by expiry, oldest
	// first, for the purge of expired rows.
	rooms  map[persistence.RoomKey]*roomRow
	ranks  map[string]*btree.BTreeG[rankItem]
	expiry *btree.BTreeG[expiryItem]
	// snaps are the ListRooms walks' frozen rankings (snapshot.go).
	snaps map[snapKey]*rankSnapshot
}

type userKey struct{ appCode, userID string }

type presenceKey struct{ appCode, roomID, userID string }

// presenceRow is one user's presence in one room.
type presenceRow struct {
	AppCode     string
	RoomID      string
	UserID      string
	LastSeenMs  int64
	ExpiresAtMs int64 // the TTL'd entry: Online while the clock is before it
}

// seenLess and expiryLess return at the first field that differs: cmp.Or
// compares every field first (its arguments are evaluated), and seenLess
// was 4% of a MariaDB node's CPU under joins.
func seenLess(a, b *presenceRow) bool {
	if a.LastSeenMs != b.LastSeenMs {
		return a.LastSeenMs < b.LastSeenMs
	}
	return a.UserID < b.UserID
}

// presenceSet is one room's presence rows by (last_seen_ms, user_id).
type presenceSet struct {
	tree *btree.BTreeG[*presenceRow]
	hint btree.PathHint
}

// userRoomRow is one user → room entry.
type userRoomRow struct {
	RoomID     string
	JoinedAtMs int64
}

// roomRow is one listed room; its key is its entry's. The ranking walks
// -Entry.Heat ascending (itemOf), heat descending. (Copies of the key and
// of the negated heat beside the entry were 40 bytes of each listed room
// and a size class up.)
type roomRow struct {
	Entry       persistence.RoomEntry
	ExpiresAtMs int64
}

var _ persistence.Directory = (*Directory)(nil)

// NewDirectory returns an empty directory.
func NewDirectory(o DirectoryOptions) *Directory {
	if o.PresenceTTL <= 0 || o.RoomTTL <= 0 {
		d := configs.Default().Directory // directory.presence_ttl, directory.room_ttl
		o.PresenceTTL, o.RoomTTL = cmp.Or(max(o.PresenceTTL, 0), d.PresenceTTL), cmp.Or(max(o.RoomTTL, 0), d.RoomTTL)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	noLocks := btree.Options{NoLocks: true} // mu guards them
	return &Directory{
		opts:     o,
		users:    map[userKey]userRoomRow{},
		presence: map[presenceKey]*presenceRow{},
		seen:     map[persistence.RoomKey]*presenceSet{},
		rooms:    map[persistence.RoomKey]*roomRow{},
		ranks:    map[string]*btree.BTreeG[rankItem]{},
		expiry:   btree.NewBTreeGOptions(expiryLess, noLocks),
	}
}

// Close makes every later call fail with ErrUnavailable, as a closed Redis
// client would.
func (d *Directory) Close() error {
	d.closed.Store(true)
	return nil
}

func (d *Directory) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closed.Load() {
		return fmt.Errorf("memdb: directory closed: %w", persistence.ErrUnavailable)
	}
	return nil
}

func (d *Directory) nowMs() int64 { return d.opts.Clock().UnixMilli() }

// lock takes the write lock after the entry check.
func (d *Directory) lock(ctx context.Context) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	return nil
}

// Heartbeat implements persistence.Directory.
func (d *Directory) Heartbeat(ctx context.Context, key persistence.RoomKey, userID string, nowMs int64) error {
	if err := d.lock(ctx); err != nil {
		return err
	}
	defer d.mu.Unlock()
	d.touch(key, userID, nowMs, false)
	return nil
}

// touch records userID seen in key at seenMs. The last-seen never moves
// back; onlyIfAbsent leaves an existing row alone (SyncRoom's seeding).
// Under the write lock.
func (d *Directory) touch(key persistence.RoomKey, userID string, seenMs int64, onlyIfAbsent bool) {
	k := presenceKey{key.AppCode, key.RoomID, userID}
	row := &presenceRow{AppCode: key.AppCode, RoomID: key.RoomID, UserID: userID, LastSeenMs: seenMs}
	set := d.seen[key]
	old := d.presence[k]
	if old != nil {
		if onlyIfAbsent {
			return
		}
		row.LastSeenMs = max(row.LastSeenMs, old.LastSeenMs)
		set.tree.Delete(old)
	}
	row.ExpiresAtMs = d.nowMs() + d.opts.PresenceTTL.Milliseconds()
	d.presence[k] = row
	if set == nil {
		set = &presenceSet{tree: btree.NewBTreeGOptions(seenLess, btree.Options{NoLocks: true})} // mu guards it
		d.seen[key] = set
	}
	set.tree.SetHint(row, &set.hint)
}

// dropPresence drops p from its room's set (and the set when it empties).
// Under the write lock.
func (d *Directory) dropPresence(p *presenceRow) {
	key := persistence.RoomKey{AppCode: p.AppCode, RoomID: p.RoomID}
	if set := d.seen[key]; set != nil {
		set.tree.Delete(p)
		if set.tree.Len() == 0 {
			delete(d.seen, key)
		}
	}
}

// roomPresence calls fn with key's presence rows, oldest first, until fn
// returns false. Under the lock.
func (d *Directory) roomPresence(key persistence.RoomKey, fn func(*presenceRow) bool) {
	if set := d.seen[key]; set != nil {
		set.tree.Scan(fn)
	}
}

// StalePresence implements persistence.Directory.
func (d *Directory) StalePresence(ctx context.Context, key persistence.RoomKey, beforeMs int64, limit int) ([]persistence.Presence, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.stale(key, beforeMs, limit), nil
}

// stale is key's presence at or before beforeMs, oldest first, up to
// limit. Under the lock.
func (d *Directory) stale(key persistence.RoomKey, beforeMs int64, limit int) []persistence.Presence {
	var out []persistence.Presence
	d.roomPresence(key, func(p *presenceRow) bool {
		if len(out) >= limit || p.LastSeenMs > beforeMs {
			return false
		}
		out = append(out, persistence.Presence{UserID: p.UserID, LastSeenMs: p.LastSeenMs})
		return true
	})
	return out
}

// StalePresenceRooms implements persistence.Directory.
func (d *Directory) StalePresenceRooms(ctx context.Context, keys []persistence.RoomKey, beforeMs int64, limit int) ([][]persistence.Presence, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([][]persistence.Presence, len(keys))
	for i, key := range keys {
		out[i] = d.stale(key, beforeMs, limit)
	}
	return out, nil
}

// SetUserRoom implements persistence.Directory.
func (d *Directory) SetUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.UserRoom, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.UserRoom{}, err
	}
	defer d.mu.Unlock()
	var prev persistence.UserRoom
	uk := userKey{key.AppCode, userID}
	if old, ok := d.users[uk]; ok && old.RoomID != key.RoomID {
		prev = persistence.UserRoom{AppCode: key.AppCode, UserID: userID, RoomID: old.RoomID, JoinedAtMs: old.JoinedAtMs}
	}
	d.users[uk] = userRoomRow{RoomID: key.RoomID, JoinedAtMs: joinedAtMs}
	d.touch(key, userID, joinedAtMs, false)
	return prev, nil
}

// ClearUserRoom implements persistence.Directory.
func (d *Directory) ClearUserRoom(ctx context.Context, key persistence.RoomKey, userID string) error {
	if err := d.lock(ctx); err != nil {
		return err
	}
	defer d.mu.Unlock()
	d.clearUser(key, userID)
	return nil
}

// clearUser drops userID's presence in key, and their user → room entry
// if it names key. Under the write lock.
func (d *Directory) clearUser(key persistence.RoomKey, userID string) {
	pk := presenceKey{key.AppCode, key.RoomID, userID}
	if p := d.presence[pk]; p != nil {
		d.dropPresence(p)
		delete(d.presence, pk)
	}
	uk := userKey{key.AppCode, userID}
	if ur, ok := d.users[uk]; ok && ur.RoomID == key.RoomID {
		delete(d.users, uk)
	}
}

// UserRoom implements persistence.Directory.
func (d *Directory) UserRoom(ctx context.Context, appCode, userID string) (persistence.UserRoom, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.UserRoom{}, err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	ur, ok := d.users[userKey{appCode, userID}]
	if !ok {
		return persistence.UserRoom{}, fmt.Errorf("user %s of app %s: %w", userID, appCode, persistence.ErrNotFound)
	}
	out := persistence.UserRoom{AppCode: appCode, UserID: userID, RoomID: ur.RoomID, JoinedAtMs: ur.JoinedAtMs}
	if p := d.presence[presenceKey{appCode, ur.RoomID, userID}]; p != nil {
		out.LastSeenMs = p.LastSeenMs
		out.Online = p.ExpiresAtMs > d.nowMs()
	}
	return out, nil
}

// UpdateRoom implements persistence.Directory.
func (d *Directory) UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.RankChange{}, err
	}
	defer d.mu.Unlock()
	d.dropExpired(d.nowMs())
	return d.updateRoom(e), nil
}

// updateRoom writes e's row and returns its rank before and after, the
// 1-based position among the app's listed rooms (0: not listed, or its
// row expired). Under the write lock.
func (d *Directory) updateRoom(e persistence.RoomEntry) persistence.RankChange {
	var rc persistence.RankChange
	now := d.nowMs()
	tr := d.ranking(e.AppCode)
	e.Rank = 0
	row := &roomRow{Entry: e, ExpiresAtMs: now + d.opts.RoomTTL.Milliseconds()}
	next := itemOf(row)
	rc.Rank = below(tr, next) + 1
	key := persistence.RoomKey{AppCode: e.AppCode, RoomID: e.RoomID}
	if old := d.rooms[key]; old != nil {
		if old.ExpiresAtMs > now {
			rc.Prev = below(tr, itemOf(old)) + 1
		}
		if rankLess(itemOf(old), next) {
			rc.Rank-- // the old place is given up
		}
		tr.Delete(itemOf(old))
		d.expiry.Delete(expiryOf(old))
	}
	d.rooms[key] = row
	tr.Set(next)
	d.expiry.Set(expiryOf(row))
	return rc
}

// dropExpired drops the room rows expired at now, oldest first, so ranks
// count live rooms only, as the listing does. Each row is dropped once:
// the cost is spread over the writes that come by. Under the write lock.
func (d *Directory) dropExpired(now int64) {
	var gone []expiryItem
	d.expiry.Scan(func(it expiryItem) bool {
		if it.atMs > now {
			return false
		}
		gone = append(gone, it)
		return true
	})
	for _, it := range gone {
		d.dropRoom(d.rooms[persistence.RoomKey{AppCode: it.appCode, RoomID: it.room}])
	}
}

// dropRoom deletes a room row with its ranking and expiry items. Under the
// write lock.
func (d *Directory) dropRoom(row *roomRow) {
	delete(d.rooms, persistence.RoomKey{AppCode: row.Entry.AppCode, RoomID: row.Entry.RoomID})
	d.ranking(row.Entry.AppCode).Delete(itemOf(row))
	d.expiry.Delete(expiryOf(row))
}

// RemoveRoom implements persistence.Directory.
func (d *Directory) RemoveRoom(ctx context.Context, key persistence.RoomKey) error {
	if err := d.lock(ctx); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if row := d.rooms[key]; row != nil {
		d.dropRoom(row)
	}
	return nil
}

// ListRooms implements persistence.Directory. The page is read from the
// app's ranking tree (O(limit · log n)), after the expired rows are
// dropped under the same lock, so Total and the ranks count live rooms
// only.
func (d *Directory) ListRooms(ctx context.Context, appCode string, offset, limit int) (persistence.RoomPage, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.RoomPage{}, err
	}
	defer d.mu.Unlock()
	d.dropExpired(d.nowMs())
	var page persistence.RoomPage
	tr := d.ranks[appCode]
	if tr == nil {
		return page, nil
	}
	page.Total = int64(tr.Len())
	for i := max(offset, 0); i < tr.Len() && len(page.Rooms) < limit; i++ {
		it, _ := tr.GetAt(i)
		row := d.rooms[persistence.RoomKey{AppCode: appCode, RoomID: it.roomID}]
		if row == nil {
			return persistence.RoomPage{}, fmt.Errorf("memdb: directory: ranked room %s/%s has no row", appCode, it.roomID)
		}
		e := row.Entry
		e.Rank = int64(i) + 1
		page.Rooms = append(page.Rooms, e)
	}
	return page, nil
}

// ClaimUserRoom implements persistence.Directory.
func (d *Directory) ClaimUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.Claim, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.Claim{}, err
	}
	defer d.mu.Unlock()
	return d.claim(key, userID, joinedAtMs), nil
}

// claim points userID's entry at key unless it names a newer join. Under
// the write lock.
func (d *Directory) claim(key persistence.RoomKey, userID string, joinedAtMs int64) persistence.Claim {
	c := persistence.Claim{UserID: userID, Won: true}
	uk := userKey{key.AppCode, userID}
	ur, ok := d.users[uk]
	switch {
	case ok && ur.RoomID == key.RoomID:
		return c
	case ok && ur.JoinedAtMs >= joinedAtMs:
		c.Won, c.Other = false, ur.RoomID
		return c
	case ok:
		c.Other = ur.RoomID
	}
	d.users[uk] = userRoomRow{RoomID: key.RoomID, JoinedAtMs: joinedAtMs}
	return c
}

// SyncRoom implements persistence.Directory under one lock.
func (d *Directory) SyncRoom(ctx context.Context, s persistence.RoomSync) (persistence.RankChange, []persistence.Claim, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.RankChange{}, nil, err
	}
	defer d.mu.Unlock()
	key := persistence.RoomKey{AppCode: s.Entry.AppCode, RoomID: s.Entry.RoomID}
	d.dropExpired(d.nowMs())
	rc := d.updateRoom(s.Entry)
	var gone []string
	d.roomPresence(key, func(p *presenceRow) bool {
		if _, member := s.Members[p.UserID]; !member {
			gone = append(gone, p.UserID)
		}
		return true
	})
	for _, u := range gone {
		d.clearUser(key, u)
	}
	var claims []persistence.Claim
	for _, u := range slices.Sorted(maps.Keys(s.Members)) {
		d.touch(key, u, s.NowMs, true)
		if c := d.claim(key, u, s.Members[u]); c.Other != "" {
			claims = append(claims, c)
		}
	}
	slices.SortFunc(claims, func(a, b persistence.Claim) int { return cmp.Compare(a.UserID, b.UserID) })
	return rc, claims, nil
}

// expiryItem is a room row's place in the expiry order.
type expiryItem struct {
	atMs          int64
	appCode, room string
}

func expiryLess(a, b expiryItem) bool {
	if a.atMs != b.atMs {
		return a.atMs < b.atMs
	}
	if c := strings.Compare(a.appCode, b.appCode); c != 0 {
		return c < 0
	}
	return a.room < b.room
}

func expiryOf(r *roomRow) expiryItem {
	return expiryItem{atMs: r.ExpiresAtMs, appCode: r.Entry.AppCode, room: r.Entry.RoomID}
}

// rankItem is a room's place in its app's ranking: heat descending, then
// room_id ascending (NegHeat ascending).
type rankItem struct {
	negHeat int64
	roomID  string
}

func rankLess(a, b rankItem) bool {
	if a.negHeat != b.negHeat {
		return a.negHeat < b.negHeat
	}
	return a.roomID < b.roomID
}

func itemOf(r *roomRow) rankItem { return rankItem{negHeat: -r.Entry.Heat, roomID: r.Entry.RoomID} }

// ranking returns app's ranking tree, creating it.
func (d *Directory) ranking(app string) *btree.BTreeG[rankItem] {
	tr := d.ranks[app]
	if tr == nil {
		tr = btree.NewBTreeGOptions(rankLess, btree.Options{NoLocks: true})
		d.ranks[app] = tr
	}
	return tr
}

// below counts the items of tr that rank before it: a binary search over
// positions, each an O(log n) descent of the counted tree.
func below(tr *btree.BTreeG[rankItem], it rankItem) int64 {
	lo, hi := 0, tr.Len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if v, _ := tr.GetAt(mid); rankLess(v, it) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return int64(lo)
}
