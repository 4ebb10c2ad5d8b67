package memdb

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

var _ persistence.RankingSnapshots = (*Directory)(nil)

// rankSnapshot is a frozen order of an app's ranking.
type rankSnapshot struct {
	rooms     []string
	expiresMs int64
}

type snapKey struct{ appCode, id string }

// SnapshotRanking implements persistence.RankingSnapshots.
func (d *Directory) SnapshotRanking(ctx context.Context, appCode string, window, ttl time.Duration) (string, error) {
	if err := d.lock(ctx); err != nil {
		return "", err
	}
	defer d.mu.Unlock()
	now := d.nowMs()
	d.dropExpired(now)
	for k, s := range d.snaps {
		if s.expiresMs <= now {
			delete(d.snaps, k)
		}
	}
	w := max(window.Milliseconds(), 1)
	id := strconv.FormatInt(now/w*w, 10)
	k := snapKey{appCode, id}
	if _, ok := d.snaps[k]; ok {
		return id, nil
	}
	s := &rankSnapshot{expiresMs: now + ttl.Milliseconds()}
	if tr := d.ranks[appCode]; tr != nil {
		tr.Scan(func(it rankItem) bool {
			s.rooms = append(s.rooms, it.roomID)
			return true
		})
	}
	if d.snaps == nil {
		d.snaps = map[snapKey]*rankSnapshot{}
	}
	d.snaps[k] = s
	return id, nil
}

// ListSnapshot implements persistence.RankingSnapshots.
func (d *Directory) ListSnapshot(ctx context.Context, appCode, id string, offset, limit int, ttl time.Duration) (persistence.RoomPage, error) {
	if err := d.lock(ctx); err != nil {
		return persistence.RoomPage{}, err
	}
	defer d.mu.Unlock()
	now := d.nowMs()
	d.dropExpired(now)
	s := d.snaps[snapKey{appCode, id}]
	if s == nil || s.expiresMs <= now {
		return persistence.RoomPage{}, fmt.Errorf("ranking snapshot %s of %s: %w", id, appCode, persistence.ErrNotFound)
	}
	s.expiresMs = now + ttl.Milliseconds()
	page := persistence.RoomPage{Total: int64(len(s.rooms))}
	for i := max(offset, 0); i < len(s.rooms) && i < offset+limit; i++ {
		row := d.rooms[persistence.RoomKey{AppCode: appCode, RoomID: s.rooms[i]}]
		if row == nil {
			continue // stopped since the snapshot
		}
		e := row.Entry
		e.Rank = int64(i) + 1
		page.Rooms = append(page.Rooms, e)
	}
	return page, nil
}
