package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hyapp/roomcell/persistence"
)

var _ persistence.RankingSnapshots = (*Directory)(nil)

func (d *Directory) snapKey(app, id string) string { return d.opts.KeyPrefix + "rks:" + app + ":" + id }

// snapshotScript: KEYS snapshot, ranking; ARGV ttl ms. Copies the ranking
// once per snapshot key, atomically, so every node asking in the same
// window reads the same copy.
var snapshotScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
redis.call('ZUNIONSTORE', KEYS[1], 1, KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

// SnapshotRanking implements persistence.RankingSnapshots. The id names
// the window (unix ms of its start), so the nodes share one copy per app
// and window.
func (d *Directory) SnapshotRanking(ctx context.Context, appCode string, window, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	w := max(window.Milliseconds(), 1)
	id := strconv.FormatInt(time.Now().UnixMilli()/w*w, 10)
	err := snapshotScript.Run(ctx, d.c, []string{d.snapKey(appCode, id), d.rankKey(appCode)}, ttl.Milliseconds()).Err()
	if err != nil && err != goredis.Nil {
		return "", wrap("snapshot ranking", err)
	}
	return id, nil
}

// ListSnapshot implements persistence.RankingSnapshots.
func (d *Directory) ListSnapshot(ctx context.Context, appCode, id string, offset, limit int, ttl time.Duration) (persistence.RoomPage, error) {
	if err := ctx.Err(); err != nil {
		return persistence.RoomPage{}, err
	}
	key := d.snapKey(appCode, id)
	n, err := d.c.PExpire(ctx, key, ttl).Result()
	if err != nil {
		return persistence.RoomPage{}, wrap("list snapshot", err)
	}
	if !n {
		// An app with no rooms has no copy either: an empty walk.
		rk, err := d.c.Exists(ctx, d.rankKey(appCode)).Result()
		if err != nil {
			return persistence.RoomPage{}, wrap("list snapshot", err)
		}
		if rk == 0 && offset == 0 {
			return persistence.RoomPage{}, nil
		}
		return persistence.RoomPage{}, fmt.Errorf("ranking snapshot %s of %s: %w", id, appCode, persistence.ErrNotFound)
	}
	page, _, err := d.listKey(ctx, key, appCode, offset, limit)
	return page, wrap("list snapshot", err)
}
