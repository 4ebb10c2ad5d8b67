package memdb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/persistence"
)

// DirectoryOptions tune the dev-mode directory. Zero values take the
// defaults.
type DirectoryOptions struct {
	// PresenceTTL: how long a presence entry counts as online after its
	// newest heartbeat (default 10m).
	PresenceTTL time.Duration
	// RoomTTL: how long a room stays listed after its newest update
	// (default 2m); rooms refresh well within it.
	RoomTTL time.Duration
	// Clock decides expiry only (default time.Now); every other time is
	// the caller's nowMs.
	Clock func() time.Time
}

// Directory is persistence.Directory on go-memdb, for dev mode and tests.
// It has its own MemDB; one writer transaction at a time makes every
// method atomic, which is what the Redis directory gets from Lua and SET
// GET. The zero value is not usable; call NewDirectory.
type Directory struct {
	db     *memdb.MemDB
	opts   DirectoryOptions
	closed atomic.Bool
	// ranks holds each app's live rooms in ranking order, counted, so a
	// rank is found in O(log² n) rather than by walking the app's rooms
	// (which cost more than the command it followed at 1000 rooms). Read
	// and changed only under the MemDB's writer lock: a write collects its
	// changes (rankOps) and applies them just before it commits, so an
	// aborted one leaves the tree alone. (Txn.Defer would run them after
	// the lock is released.)
	ranks map[string]*btree.BTreeG[rankItem]
	// expiry holds every room row by expiry, oldest first, for the purge
	// of expired rows: kept like ranks, in place of a radix index on the
	// rooms table (issue 13: an index entry is ~0.5 KB per room, an item
	// here ~50 bytes). nextExpiry is its earliest time (MaxInt64 when
	// empty), read without the lock so a write with nothing expired takes
	// no writer lock for the purge.
	expiry     *btree.BTreeG[expiryItem]
	nextExpiry atomic.Int64
	// writes groups the rooms' concurrent user writes (SetUserRoom,
	// ClearUserRoom) into one write transaction.
	writes writeGroup
}

// rankOps are ranking and expiry changes waiting for their transaction's
// commit.
type rankOps []func()

// commit applies ops and commits txn, under its writer lock.
func (d *Directory) commit(txn *memdb.Txn, ops rankOps) {
	d.apply(ops)
	txn.Commit()
}

// apply runs ops, under the writer lock, and moves nextExpiry with them.
func (d *Directory) apply(ops rankOps) {
	for _, op := range ops {
		op()
	}
	next := int64(math.MaxInt64)
	if it, ok := d.expiry.Min(); ok {
		next = it.atMs
	}
	d.nextExpiry.Store(next)
}

// expiryItem is a room row's place in the expiry order.
type expiryItem struct {
	atMs          int64
	appCode, room string
}

func expiryLess(a, b expiryItem) bool {
	return cmp.Or(cmp.Compare(a.atMs, b.atMs), cmp.Compare(a.appCode, b.appCode), cmp.Compare(a.room, b.room)) < 0
}

func expiryOf(r *roomRow) expiryItem {
	return expiryItem{atMs: r.ExpiresAtMs, appCode: r.AppCode, room: r.RoomID}
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

func itemOf(r *roomRow) rankItem { return rankItem{negHeat: r.NegHeat, roomID: r.RoomID} }

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

var _ persistence.Directory = (*Directory)(nil)

// presenceRow is one user's presence in one room.
type presenceRow struct {
	AppCode     string
	RoomID      string
	UserID      string
	LastSeenMs  int64
	ExpiresAtMs int64 // the TTL'd entry: Online while the clock is before it
}

// userRoomRow is one user → room entry.
type userRoomRow struct {
	AppCode    string
	UserID     string
	RoomID     string
	JoinedAtMs int64
}

// roomRow is one listed room. NegHeat is -Entry.Heat, set only by
// newRoomRow, so the rank index walks heat descending.
type roomRow struct {
	AppCode     string
	RoomID      string
	NegHeat     int64
	Entry       persistence.RoomEntry
	ExpiresAtMs int64
}

// NewDirectory returns an empty directory.
func NewDirectory(o DirectoryOptions) *Directory {
	if o.PresenceTTL <= 0 {
		o.PresenceTTL = 10 * time.Minute
	}
	if o.RoomTTL <= 0 {
		o.RoomTTL = 2 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	db, err := memdb.NewMemDB(directorySchema())
	if err != nil {
		// The schema is a constant of this package: failing is a bug.
		panic(fmt.Sprintf("memdb: directory schema: %v", err))
	}
	d := &Directory{db: db, opts: o, ranks: map[string]*btree.BTreeG[rankItem]{},
		expiry: btree.NewBTreeGOptions(expiryLess, btree.Options{NoLocks: true})}
	d.nextExpiry.Store(math.MaxInt64)
	d.writes = writeGroup{db: db}
	return d
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

// Heartbeat implements persistence.Directory.
func (d *Directory) Heartbeat(ctx context.Context, key persistence.RoomKey, userID string, nowMs int64) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	if err := d.touch(txn, key, userID, nowMs, false); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// touch records userID seen in key at seenMs. The last-seen never moves
// back; onlyIfAbsent leaves an existing row alone (SyncRoom's seeding).
func (d *Directory) touch(txn *memdb.Txn, key persistence.RoomKey, userID string, seenMs int64, onlyIfAbsent bool) error {
	row := presenceRow{AppCode: key.AppCode, RoomID: key.RoomID, UserID: userID, LastSeenMs: seenMs}
	raw, err := txn.First(tableDirPresence, indexID, key.AppCode, key.RoomID, userID)
	if err != nil {
		return err
	}
	if raw != nil {
		if onlyIfAbsent {
			return nil
		}
		row.LastSeenMs = max(row.LastSeenMs, raw.(*presenceRow).LastSeenMs)
	}
	row.ExpiresAtMs = d.nowMs() + d.opts.PresenceTTL.Milliseconds()
	return txn.Insert(tableDirPresence, &row)
}

// StalePresence implements persistence.Directory.
func (d *Directory) StalePresence(ctx context.Context, key persistence.RoomKey, beforeMs int64, limit int) ([]persistence.Presence, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	txn := d.db.Txn(false)
	it, err := txn.Get(tableDirPresence, indexDirSeen+"_prefix", key.AppCode, key.RoomID)
	if err != nil {
		return nil, err
	}
	var out []persistence.Presence
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		p := raw.(*presenceRow)
		if p.LastSeenMs > beforeMs {
			break
		}
		out = append(out, persistence.Presence{UserID: p.UserID, LastSeenMs: p.LastSeenMs})
	}
	return out, nil
}

// SetUserRoom implements persistence.Directory.
func (d *Directory) SetUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.UserRoom, error) {
	var prev persistence.UserRoom
	if err := d.ready(ctx); err != nil {
		return prev, err
	}
	err := d.writes.do(func(b *groupTxn) error {
		prev = persistence.UserRoom{}
		old, err := getUserRoom(b.Txn, key.AppCode, userID)
		if err != nil {
			return err
		}
		if old != nil && old.RoomID != key.RoomID {
			prev = persistence.UserRoom{AppCode: key.AppCode, UserID: userID, RoomID: old.RoomID, JoinedAtMs: old.JoinedAtMs}
		}
		b.dirty = true // from here on a failure has written
		if err := b.Insert(tableDirUserRoom, &userRoomRow{AppCode: key.AppCode, UserID: userID, RoomID: key.RoomID, JoinedAtMs: joinedAtMs}); err != nil {
			return err
		}
		if err := d.touch(b.Txn, key, userID, joinedAtMs, false); err != nil {
			return err
		}
		b.dirty = false
		return nil
	})
	if err != nil {
		return persistence.UserRoom{}, err
	}
	return prev, nil
}

func getUserRoom(txn *memdb.Txn, appCode, userID string) (*userRoomRow, error) {
	raw, err := txn.First(tableDirUserRoom, indexID, appCode, userID)
	if err != nil || raw == nil {
		return nil, err
	}
	return raw.(*userRoomRow), nil
}

// ClearUserRoom implements persistence.Directory.
func (d *Directory) ClearUserRoom(ctx context.Context, key persistence.RoomKey, userID string) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	return d.writes.do(func(b *groupTxn) error {
		if err := clearUser(b.Txn, key, userID); err != nil {
			b.dirty = true // it may have deleted the presence row
			return err
		}
		return nil
	})
}

func clearUser(txn *memdb.Txn, key persistence.RoomKey, userID string) error {
	if _, err := txn.DeleteAll(tableDirPresence, indexID, key.AppCode, key.RoomID, userID); err != nil {
		return err
	}
	ur, err := getUserRoom(txn, key.AppCode, userID)
	if err != nil {
		return err
	}
	if ur != nil && ur.RoomID == key.RoomID {
		return txn.Delete(tableDirUserRoom, ur)
	}
	return nil
}

// UserRoom implements persistence.Directory.
func (d *Directory) UserRoom(ctx context.Context, appCode, userID string) (persistence.UserRoom, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.UserRoom{}, err
	}
	txn := d.db.Txn(false)
	ur, err := getUserRoom(txn, appCode, userID)
	if err != nil {
		return persistence.UserRoom{}, err
	}
	if ur == nil {
		return persistence.UserRoom{}, fmt.Errorf("user %s of app %s: %w", userID, appCode, persistence.ErrNotFound)
	}
	out := persistence.UserRoom{AppCode: appCode, UserID: userID, RoomID: ur.RoomID, JoinedAtMs: ur.JoinedAtMs}
	raw, err := txn.First(tableDirPresence, indexID, appCode, ur.RoomID, userID)
	if err != nil {
		return persistence.UserRoom{}, err
	}
	if raw != nil {
		p := raw.(*presenceRow)
		out.LastSeenMs = p.LastSeenMs
		out.Online = p.ExpiresAtMs > d.nowMs()
	}
	return out, nil
}

// UpdateRoom implements persistence.Directory.
func (d *Directory) UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.RankChange{}, err
	}
	if err := d.purgeExpired(); err != nil {
		return persistence.RankChange{}, err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	var ops rankOps
	rc, err := d.updateRoom(txn, e, &ops)
	if err != nil {
		return persistence.RankChange{}, err
	}
	d.commit(txn, ops)
	return rc, nil
}

// updateRoom writes e's row and returns its rank before and after, the
// 1-based position among the app's listed rooms (0: not listed, or its
// row expired).
func (d *Directory) updateRoom(txn *memdb.Txn, e persistence.RoomEntry, ops *rankOps) (persistence.RankChange, error) {
	var rc persistence.RankChange
	now := d.nowMs()
	tr := d.ranking(e.AppCode)
	raw, err := txn.First(tableDirRooms, indexID, e.AppCode, e.RoomID)
	if err != nil {
		return rc, err
	}
	e.Rank = 0
	row := &roomRow{AppCode: e.AppCode, RoomID: e.RoomID, NegHeat: -e.Heat, Entry: e, ExpiresAtMs: now + d.opts.RoomTTL.Milliseconds()}
	next := itemOf(row)
	rc.Rank = below(tr, next) + 1
	var old *roomRow
	if raw != nil {
		old = raw.(*roomRow)
		if old.ExpiresAtMs > now {
			rc.Prev = below(tr, itemOf(old)) + 1
		}
		if rankLess(itemOf(old), next) {
			rc.Rank-- // the old place is given up
		}
		if err := txn.Delete(tableDirRooms, old); err != nil {
			return rc, err
		}
	}
	if err := txn.Insert(tableDirRooms, row); err != nil {
		return rc, err
	}
	*ops = append(*ops, func() {
		if old != nil {
			tr.Delete(itemOf(old))
			d.expiry.Delete(expiryOf(old))
		}
		tr.Set(next)
		d.expiry.Set(expiryOf(row))
	})
	return rc, nil
}

// purgeExpired drops the expired room rows, oldest first, so ranks count
// live rooms only, as the listing does. Each row is dropped once: the cost
// is spread over the writes that come by. It commits its own transaction
// before a ranked write opens one: the ranking changes on commit.
func (d *Directory) purgeExpired() error {
	now := d.nowMs()
	if d.nextExpiry.Load() > now {
		return nil // nothing expired: no writer lock taken
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	ops, err := d.dropExpired(txn, now)
	if err != nil {
		return err
	}
	d.commit(txn, ops)
	return nil
}

// dropExpired deletes the rows expired at now in txn and returns their
// ranking and expiry changes. Under the writer lock: it reads d.expiry.
func (d *Directory) dropExpired(txn *memdb.Txn, now int64) (rankOps, error) {
	var gone []expiryItem
	d.expiry.Scan(func(it expiryItem) bool {
		if it.atMs > now {
			return false
		}
		gone = append(gone, it)
		return true
	})
	var ops rankOps
	for _, it := range gone {
		raw, err := txn.First(tableDirRooms, indexID, it.appCode, it.room)
		if err != nil {
			return nil, err
		}
		if raw == nil || raw.(*roomRow).ExpiresAtMs != it.atMs {
			return nil, fmt.Errorf("memdb: directory: expiry item %+v has no row", it)
		}
		if err := d.dropRoom(txn, raw.(*roomRow), &ops); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// dropRoom deletes a room row and, on commit, its ranking item.
func (d *Directory) dropRoom(txn *memdb.Txn, row *roomRow, ops *rankOps) error {
	if err := txn.Delete(tableDirRooms, row); err != nil {
		return err
	}
	tr := d.ranking(row.AppCode)
	*ops = append(*ops, func() {
		tr.Delete(itemOf(row))
		d.expiry.Delete(expiryOf(row))
	})
	return nil
}

// RemoveRoom implements persistence.Directory.
func (d *Directory) RemoveRoom(ctx context.Context, key persistence.RoomKey) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableDirRooms, indexID, key.AppCode, key.RoomID)
	if err != nil {
		return err
	}
	var ops rankOps
	if raw != nil {
		if err := d.dropRoom(txn, raw.(*roomRow), &ops); err != nil {
			return err
		}
	}
	d.commit(txn, ops)
	return nil
}

// ListRooms implements persistence.Directory. The page is read from the
// app's ranking tree (O(limit · log n)); the rooms' rows have no rank
// index of their own (issue 13: an index entry per room is ~0.5 KB). The
// tree is read under the writer lock, after the expired rows are dropped
// in the same transaction, so Total and the ranks count live rooms only.
func (d *Directory) ListRooms(ctx context.Context, appCode string, offset, limit int) (persistence.RoomPage, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.RoomPage{}, err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	ops, err := d.dropExpired(txn, d.nowMs())
	if err != nil {
		return persistence.RoomPage{}, err
	}
	// From here the trees have changed: the transaction commits whatever
	// the read below returns.
	d.apply(ops)
	page, err := d.page(txn, appCode, offset, limit)
	txn.Commit()
	return page, err
}

// page reads ranks offset+1 .. offset+limit of appCode's ranking.
func (d *Directory) page(txn *memdb.Txn, appCode string, offset, limit int) (persistence.RoomPage, error) {
	var page persistence.RoomPage
	tr := d.ranks[appCode]
	if tr == nil {
		return page, nil
	}
	page.Total = int64(tr.Len())
	for i := max(offset, 0); i < tr.Len() && len(page.Rooms) < limit; i++ {
		it, _ := tr.GetAt(i)
		raw, err := txn.First(tableDirRooms, indexID, appCode, it.roomID)
		if err != nil {
			return persistence.RoomPage{}, err
		}
		if raw == nil {
			return persistence.RoomPage{}, fmt.Errorf("memdb: directory: ranked room %s/%s has no row", appCode, it.roomID)
		}
		e := raw.(*roomRow).Entry
		e.Rank = int64(i) + 1
		page.Rooms = append(page.Rooms, e)
	}
	return page, nil
}

// ClaimUserRoom implements persistence.Directory.
func (d *Directory) ClaimUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.Claim, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.Claim{}, err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	c, err := claim(txn, key, userID, joinedAtMs)
	if err != nil {
		return persistence.Claim{}, err
	}
	txn.Commit()
	return c, nil
}

func claim(txn *memdb.Txn, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.Claim, error) {
	c := persistence.Claim{UserID: userID, Won: true}
	ur, err := getUserRoom(txn, key.AppCode, userID)
	if err != nil {
		return c, err
	}
	switch {
	case ur != nil && ur.RoomID == key.RoomID:
		return c, nil
	case ur != nil && ur.JoinedAtMs >= joinedAtMs:
		c.Won, c.Other = false, ur.RoomID
		return c, nil
	case ur != nil:
		c.Other = ur.RoomID
	}
	return c, txn.Insert(tableDirUserRoom, &userRoomRow{AppCode: key.AppCode, UserID: userID, RoomID: key.RoomID, JoinedAtMs: joinedAtMs})
}

// SyncRoom implements persistence.Directory in one transaction.
func (d *Directory) SyncRoom(ctx context.Context, s persistence.RoomSync) (persistence.RankChange, []persistence.Claim, error) {
	if err := d.ready(ctx); err != nil {
		return persistence.RankChange{}, nil, err
	}
	key := persistence.RoomKey{AppCode: s.Entry.AppCode, RoomID: s.Entry.RoomID}
	if err := d.purgeExpired(); err != nil {
		return persistence.RankChange{}, nil, err
	}
	txn := d.db.Txn(true)
	defer txn.Abort()
	var ops rankOps
	rc, err := d.updateRoom(txn, s.Entry, &ops)
	if err != nil {
		return rc, nil, err
	}
	it, err := txn.Get(tableDirPresence, indexDirSeen+"_prefix", key.AppCode, key.RoomID)
	if err != nil {
		return rc, nil, err
	}
	var gone []string
	for r := it.Next(); r != nil; r = it.Next() {
		u := r.(*presenceRow).UserID
		if _, member := s.Members[u]; !member {
			gone = append(gone, u)
		}
	}
	for _, u := range gone {
		if err := clearUser(txn, key, u); err != nil {
			return rc, nil, err
		}
	}
	var claims []persistence.Claim
	for _, u := range slices.Sorted(maps.Keys(s.Members)) {
		if err := d.touch(txn, key, u, s.NowMs, true); err != nil {
			return rc, nil, err
		}
		c, err := claim(txn, key, u, s.Members[u])
		if err != nil {
			return rc, nil, err
		}
		if c.Other != "" {
			claims = append(claims, c)
		}
	}
	d.commit(txn, ops)
	slices.SortFunc(claims, func(a, b persistence.Claim) int { return cmp.Compare(a.UserID, b.UserID) })
	return rc, claims, nil
}
