package redis

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// Options tune the directory. Zero values take the defaults.
type Options struct {
	// KeyPrefix starts every key (default "roomcell:").
	KeyPrefix string
	// PresenceTTL: lifetime of a presence entry after its newest
	// heartbeat (default directory.presence_ttl's). The presence set is not TTL'd: the stale
	// worker needs the users whose entry is gone.
	PresenceTTL time.Duration
	// RoomTTL: lifetime of a listed room's entry after its newest update
	// (default directory.room_ttl's); rooms refresh well within it.
	RoomTTL time.Duration
	// TLS, when set, is used by Open to reach the server (redis.tls).
	TLS *tls.Config
}

func (o *Options) setDefaults() {
	if o.KeyPrefix == "" {
		o.KeyPrefix = "roomcell:"
	}
	if o.PresenceTTL <= 0 || o.RoomTTL <= 0 {
		d := configs.Default().Directory // directory.presence_ttl, directory.room_ttl
		o.PresenceTTL, o.RoomTTL = cmp.Or(max(o.PresenceTTL, 0), d.PresenceTTL), cmp.Or(max(o.RoomTTL, 0), d.RoomTTL)
	}
}

// Directory is persistence.Directory on Redis.
type Directory struct {
	c    goredis.UniversalClient
	opts Options
	own  bool // Close closes c
}

var _ persistence.Directory = (*Directory)(nil)

// New returns a directory over an existing client, which the caller keeps
// and closes.
func New(c goredis.UniversalClient, o Options) *Directory {
	o.setDefaults()
	return &Directory{c: c, opts: o}
}

// Open builds a client from cfg (every network wait bounded by
// cfg.Timeout, one retry, one dial attempt, so an outage costs a caller at
// most a few timeouts, never the library's 5 s defaults) and returns a
// directory that owns it. o.KeyPrefix defaults to cfg.KeyPrefix. It does
// not dial: a Redis that is down at start-up is an outage like any other
// (call Ping to log it).
func Open(cfg configs.RedisConfig, o Options) *Directory {
	if o.KeyPrefix == "" {
		o.KeyPrefix = cfg.KeyPrefix
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	c := goredis.NewClient(&goredis.Options{
		Addr:                  cfg.Addr,
		Password:              cfg.Password,
		DB:                    cfg.DB,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		DisableIdentity:       true,
		// A plain Redis has no maintenance push notifications; "auto"
		// would send a command it rejects on every new connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		TLSConfig:                o.TLS,
	})
	d := New(c, o)
	d.own = true
	return d
}

// Ping checks the server once.
func (d *Directory) Ping(ctx context.Context) error {
	return wrap("ping", d.c.Ping(ctx).Err())
}

// Close closes the client if Open made it. Call it last at shutdown, after
// the room grains and the stale worker have stopped.
func (d *Directory) Close() error {
	if d.own {
		return d.c.Close()
	}
	return nil
}

// Keys. Ids never hold ':' (room.CheckID), so a key names one thing.
func (d *Directory) presenceKey(k persistence.RoomKey, user string) string {
	return d.opts.KeyPrefix + "pr:" + k.AppCode + ":" + k.RoomID + ":" + user
}
func (d *Directory) presenceSetKey(k persistence.RoomKey) string {
	return d.opts.KeyPrefix + "pz:" + k.AppCode + ":" + k.RoomID
}
func (d *Directory) userRoomKey(app, user string) string {
	return d.opts.KeyPrefix + "ur:" + app + ":" + user
}
func (d *Directory) roomKey(app, room string) string {
	return d.opts.KeyPrefix + "rm:" + app + ":" + room
}
func (d *Directory) rankKey(app string) string { return d.opts.KeyPrefix + "rk:" + app }

func ms(v int64) string { return strconv.FormatInt(v, 10) }

// wrap classes every failure as an outage; context errors stay matchable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redis directory %s: %w: %w", op, persistence.ErrUnavailable, err)
}

// Heartbeat implements persistence.Directory: one round trip, the entry
// and the set score (ZADD GT: a late heartbeat never moves it back).
func (d *Directory) Heartbeat(ctx context.Context, key persistence.RoomKey, userID string, nowMs int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, d.presenceKey(key, userID), nowMs, d.opts.PresenceTTL)
		p.ZAddGT(ctx, d.presenceSetKey(key), goredis.Z{Score: float64(nowMs), Member: userID})
		return nil
	})
	return wrap("heartbeat", err)
}

// StalePresence implements persistence.Directory.
func (d *Directory) StalePresence(ctx context.Context, key persistence.RoomKey, beforeMs int64, limit int) ([]persistence.Presence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	zs, err := d.c.ZRangeByScoreWithScores(ctx, d.presenceSetKey(key), &goredis.ZRangeBy{
		Min: "-inf", Max: ms(beforeMs), Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, wrap("stale presence", err)
	}
	return presenceOf(zs), nil
}

func presenceOf(zs []goredis.Z) []persistence.Presence {
	out := make([]persistence.Presence, 0, len(zs))
	for _, z := range zs {
		u, _ := z.Member.(string)
		out = append(out, persistence.Presence{UserID: u, LastSeenMs: int64(z.Score)})
	}
	return out
}

// StalePresenceRooms implements persistence.Directory: one pipeline of
// the rooms' ZRANGEBYSCOREs, one round trip.
func (d *Directory) StalePresenceRooms(ctx context.Context, keys []persistence.RoomKey, beforeMs int64, limit int) ([][]persistence.Presence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return [][]persistence.Presence{}, nil
	}
	cmds := make([]*goredis.ZSliceCmd, len(keys))
	_, err := d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, key := range keys {
			cmds[i] = p.ZRangeByScoreWithScores(ctx, d.presenceSetKey(key), &goredis.ZRangeBy{
				Min: "-inf", Max: ms(beforeMs), Count: int64(limit),
			})
		}
		return nil
	})
	if err != nil {
		return nil, wrap("stale presence of rooms", err)
	}
	out := make([][]persistence.Presence, len(keys))
	for i, c := range cmds {
		out[i] = presenceOf(c.Val())
	}
	return out, nil
}

// SetUserRoom implements persistence.Directory. SET ... GET swaps the
// entry atomically; the presence seed rides in the same MULTI.
func (d *Directory) SetUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.UserRoom, error) {
	var prev persistence.UserRoom
	if err := ctx.Err(); err != nil {
		return prev, err
	}
	var swap *goredis.Cmd
	_, err := d.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		swap = p.Do(ctx, "SET", d.userRoomKey(key.AppCode, userID), key.RoomID+":"+ms(joinedAtMs), "GET")
		p.Set(ctx, d.presenceKey(key, userID), joinedAtMs, d.opts.PresenceTTL)
		p.ZAddGT(ctx, d.presenceSetKey(key), goredis.Z{Score: float64(joinedAtMs), Member: userID})
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return prev, wrap("set user room", err)
	}
	old, err := swap.Text()
	if errors.Is(err, goredis.Nil) {
		return prev, nil
	}
	if err != nil {
		return prev, wrap("set user room", err)
	}
	if room, at := parseUserRoom(old); room != key.RoomID {
		prev = persistence.UserRoom{AppCode: key.AppCode, UserID: userID, RoomID: room, JoinedAtMs: at}
	}
	return prev, nil
}

// parseUserRoom splits "<room>:<joined_at_ms>".
func parseUserRoom(v string) (room string, joinedAtMs int64) {
	room, at, _ := strings.Cut(v, ":")
	joinedAtMs, _ = strconv.ParseInt(at, 10, 64)
	return room, joinedAtMs
}

// clearScript: KEYS user-room, presence entry, presence set; ARGV room,
// user. Compare-and-delete of the entry, unconditional presence removal.
var clearScript = goredis.NewScript(`
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

func (d *Directory) clearArgs(key persistence.RoomKey, userID string) ([]string, []any) {
	return []string{d.userRoomKey(key.AppCode, userID), d.presenceKey(key, userID), d.presenceSetKey(key)},
		[]any{key.RoomID, userID}
}

// ClearUserRoom implements persistence.Directory.
func (d *Directory) ClearUserRoom(ctx context.Context, key persistence.RoomKey, userID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	keys, args := d.clearArgs(key, userID)
	return wrap("clear user room", clearScript.Run(ctx, d.c, keys, args...).Err())
}

// UserRoom implements persistence.Directory.
func (d *Directory) UserRoom(ctx context.Context, appCode, userID string) (persistence.UserRoom, error) {
	if err := ctx.Err(); err != nil {
		return persistence.UserRoom{}, err
	}
	v, err := d.c.Get(ctx, d.userRoomKey(appCode, userID)).Result()
	if errors.Is(err, goredis.Nil) {
		return persistence.UserRoom{}, fmt.Errorf("user %s of app %s: %w", userID, appCode, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.UserRoom{}, wrap("user room", err)
	}
	out := persistence.UserRoom{AppCode: appCode, UserID: userID}
	out.RoomID, out.JoinedAtMs = parseUserRoom(v)
	key := persistence.RoomKey{AppCode: appCode, RoomID: out.RoomID}
	var online *goredis.IntCmd
	var seen *goredis.FloatCmd
	_, err = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		online = p.Exists(ctx, d.presenceKey(key, userID))
		seen = p.ZScore(ctx, d.presenceSetKey(key), userID)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return persistence.UserRoom{}, wrap("user room", err)
	}
	out.Online = online.Val() == 1
	if s, err := seen.Result(); err == nil {
		out.LastSeenMs = int64(s)
	}
	return out, nil
}

// updateScript: KEYS room hash, ranking; ARGV room, -heat, ttl ms, name,
// owner, members, heat, updated, meta (JSON of the entry's metadata). The rank before counts only while the
// room's entry is alive, as the memdb directory does.
var updateScript = goredis.NewScript(`
local prev = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  local r = redis.call('ZRANK', KEYS[2], ARGV[1])
  if r then prev = r + 1 end
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[1], 'name', ARGV[4], 'owner', ARGV[5], 'members', ARGV[6], 'heat', ARGV[7], 'updated', ARGV[8], 'meta', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {prev, redis.call('ZRANK', KEYS[2], ARGV[1]) + 1}
`)

// The ranking's score is -heat, so ZRANK/ZRANGE ascending is heat
// descending with ties in room_id order. Scores are doubles: heats above
// 2^53 rank approximately; the hash keeps the exact value.
func (d *Directory) updateArgs(e persistence.RoomEntry) ([]string, []any) {
	return []string{d.roomKey(e.AppCode, e.RoomID), d.rankKey(e.AppCode)},
		[]any{e.RoomID, ms(-e.Heat), ms(d.opts.RoomTTL.Milliseconds()), e.Name, e.OwnerUserID,
			ms(e.MemberCount), ms(e.Heat), ms(e.UpdatedAtMs), metaJSON(e)}
}

// entryMeta is the metadata of an entry as its hash keeps it.
type entryMeta struct {
	Category   string   `json:"c,omitempty"`
	Tags       []string `json:"t,omitempty"`
	CoverURL   string   `json:"u,omitempty"`
	Visibility string   `json:"v,omitempty"`
}

func metaJSON(e persistence.RoomEntry) string {
	if e.Meta == nil {
		return ""
	}
	m := e.Meta
	b, _ := json.Marshal(entryMeta{Category: m.Category, Tags: m.Tags, CoverURL: m.CoverURL, Visibility: m.Visibility})
	return string(b)
}

// setMeta fills e's metadata from its hash field; an entry written
// before the field existed has none (public, no category).
func setMeta(e *persistence.RoomEntry, raw string) {
	var m entryMeta
	if raw != "" && json.Unmarshal([]byte(raw), &m) == nil {
		e.Meta = &persistence.RoomMeta{Category: m.Category, Tags: m.Tags, CoverURL: m.CoverURL, Visibility: m.Visibility}
	}
}

func rankChange(v any, err error) (persistence.RankChange, error) {
	if err != nil {
		return persistence.RankChange{}, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return persistence.RankChange{}, fmt.Errorf("unexpected reply %v", v)
	}
	prev, _ := r[0].(int64)
	rank, _ := r[1].(int64)
	return persistence.RankChange{Prev: prev, Rank: rank}, nil
}

// UpdateRoom implements persistence.Directory.
func (d *Directory) UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error) {
	if err := ctx.Err(); err != nil {
		return persistence.RankChange{}, err
	}
	keys, args := d.updateArgs(e)
	rc, err := rankChange(updateScript.Run(ctx, d.c, keys, args...).Result())
	return rc, wrap("update room", err)
}

// RemoveRoom implements persistence.Directory.
func (d *Directory) RemoveRoom(ctx context.Context, key persistence.RoomKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := d.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Del(ctx, d.roomKey(key.AppCode, key.RoomID))
		p.ZRem(ctx, d.rankKey(key.AppCode), key.RoomID)
		return nil
	})
	return wrap("remove room", err)
}

// purgeScript: KEYS room hash, ranking; ARGV room. Drops a ranking member
// whose entry expired, unless the room was relisted meanwhile.
var purgeScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('ZREM', KEYS[2], ARGV[1])
end
return 0
`)

// ListRooms implements persistence.Directory. A room that stopped without
// unlisting (its node died) leaves a ranking member whose entry expires:
// the reader that meets it purges it and reads the page again, at most
// three times, so a page comes back full unless the dead are many.
func (d *Directory) ListRooms(ctx context.Context, appCode string, offset, limit int) (persistence.RoomPage, error) {
	if err := ctx.Err(); err != nil {
		return persistence.RoomPage{}, err
	}
	if limit <= 0 {
		return persistence.RoomPage{}, nil
	}
	for attempt := 0; ; attempt++ {
		page, dead, err := d.listOnce(ctx, appCode, offset, limit)
		if err != nil || len(dead) == 0 || attempt == 2 {
			return page, wrap("list rooms", err)
		}
		_, err = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, room := range dead {
				purgeScript.Eval(ctx, p, []string{d.roomKey(appCode, room), d.rankKey(appCode)}, room)
			}
			return nil
		})
		if err != nil {
			return page, wrap("list rooms", err)
		}
	}
}

func (d *Directory) listOnce(ctx context.Context, appCode string, offset, limit int) (persistence.RoomPage, []string, error) {
	return d.listKey(ctx, d.rankKey(appCode), appCode, offset, limit)
}

// listKey reads a page of the ranking (or a snapshot of it) at key; the
// rooms whose entry is gone come back apart.
func (d *Directory) listKey(ctx context.Context, key, appCode string, offset, limit int) (persistence.RoomPage, []string, error) {
	var ids *goredis.StringSliceCmd
	var total *goredis.IntCmd
	_, err := d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		ids = p.ZRange(ctx, key, int64(offset), int64(offset+limit-1))
		total = p.ZCard(ctx, key)
		return nil
	})
	if err != nil {
		return persistence.RoomPage{}, nil, err
	}
	page := persistence.RoomPage{Total: total.Val()}
	rooms := ids.Val()
	if len(rooms) == 0 {
		return page, nil, nil
	}
	fields := make([]*goredis.SliceCmd, len(rooms))
	_, err = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, room := range rooms {
			fields[i] = p.HMGet(ctx, d.roomKey(appCode, room), "name", "owner", "members", "heat", "updated", "meta")
		}
		return nil
	})
	if err != nil {
		return persistence.RoomPage{}, nil, err
	}
	var dead []string
	for i, room := range rooms {
		v := fields[i].Val()
		if len(v) != 6 || v[0] == nil {
			dead = append(dead, room)
			continue
		}
		s := func(j int) string { x, _ := v[j].(string); return x }
		n := func(j int) int64 { x, _ := strconv.ParseInt(s(j), 10, 64); return x }
		e := persistence.RoomEntry{
			AppCode: appCode, RoomID: room, Name: s(0), OwnerUserID: s(1),
			MemberCount: n(2), Heat: n(3), UpdatedAtMs: n(4), Rank: int64(offset + i + 1),
		}
		setMeta(&e, s(5))
		page.Rooms = append(page.Rooms, e)
	}
	return page, dead, nil
}

// claimScript: KEYS user-room; ARGV room, joined_at_ms. The newest join
// wins; a tie keeps the entry, so two claims never flip-flop.
var claimScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local i = string.find(v, ':', 1, true)
  if i then
    local r = string.sub(v, 1, i - 1)
    if r == ARGV[1] then return {1, ''} end
    if tonumber(string.sub(v, i + 1)) >= tonumber(ARGV[2]) then return {0, r} end
    redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
    return {1, r}
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
return {1, ''}
`)

func claimOf(user string, v any, err error) (persistence.Claim, error) {
	if err != nil {
		return persistence.Claim{}, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return persistence.Claim{}, fmt.Errorf("unexpected reply %v", v)
	}
	won, _ := r[0].(int64)
	other, _ := r[1].(string)
	return persistence.Claim{UserID: user, Won: won == 1, Other: other}, nil
}

// ClaimUserRoom implements persistence.Directory.
func (d *Directory) ClaimUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.Claim, error) {
	if err := ctx.Err(); err != nil {
		return persistence.Claim{}, err
	}
	v, err := claimScript.Run(ctx, d.c, []string{d.userRoomKey(key.AppCode, userID)}, key.RoomID, ms(joinedAtMs)).Result()
	c, err := claimOf(userID, v, err)
	return c, wrap("claim user room", err)
}

// seedScript: KEYS presence set, presence entry; ARGV now, user, ttl ms.
// A member with no presence gets now (a full stale_after to heartbeat);
// an existing last-seen is kept.
var seedScript = goredis.NewScript(`
if redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2]) == 1 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
end
return 0
`)

// SyncRoom implements persistence.Directory in three round trips: the
// room's entry, its presence set, then one pipeline of clears, seeds and
// claims. Pipelined scripts go as EVAL (a restarted server has forgotten
// every EVALSHA; Redis caches the compiled script either way). Each step
// is atomic for its user; the whole is not, and need not be: every step is
// idempotent and the next sync repeats it.
func (d *Directory) SyncRoom(ctx context.Context, s persistence.RoomSync) (persistence.RankChange, []persistence.Claim, error) {
	if err := ctx.Err(); err != nil {
		return persistence.RankChange{}, nil, err
	}
	key := persistence.RoomKey{AppCode: s.Entry.AppCode, RoomID: s.Entry.RoomID}
	rc, err := d.UpdateRoom(ctx, s.Entry)
	if err != nil {
		return rc, nil, err
	}
	present, err := d.c.ZRange(ctx, d.presenceSetKey(key), 0, -1).Result()
	if err != nil {
		return rc, nil, wrap("sync room", err)
	}
	members := slices.Sorted(maps.Keys(s.Members))
	claims := make([]*goredis.Cmd, len(members))
	_, err = d.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, u := range present {
			if _, ok := s.Members[u]; !ok {
				keys, args := d.clearArgs(key, u)
				clearScript.Eval(ctx, p, keys, args...)
			}
		}
		ttl := ms(d.opts.PresenceTTL.Milliseconds())
		for i, u := range members {
			seedScript.Eval(ctx, p, []string{d.presenceSetKey(key), d.presenceKey(key, u)}, ms(s.NowMs), u, ttl)
			claims[i] = claimScript.Eval(ctx, p, []string{d.userRoomKey(key.AppCode, u)}, key.RoomID, ms(s.Members[u]))
		}
		return nil
	})
	if err != nil {
		return rc, nil, wrap("sync room", err)
	}
	var out []persistence.Claim
	for i, u := range members {
		v, err := claims[i].Result()
		c, err := claimOf(u, v, err)
		if err != nil {
			return rc, nil, wrap("sync room", err)
		}
		if c.Other != "" {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b persistence.Claim) int { return cmp.Compare(a.UserID, b.UserID) })
	return rc, out, nil
}
