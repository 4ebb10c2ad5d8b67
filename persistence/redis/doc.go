// Package redis is the production room directory: persistence.Directory on
// Redis (go-redis/v9). It owns every key under its configured prefix:
// pr:<app>:<room>:<user> (the TTL'd presence entry), pz:<app>:<room> (the
// room's presence sorted set by last-seen), ur:<app>:<user> (user → room,
// "<room>:<joined_at_ms>"), rm:<app>:<room> (a listed room's hash, TTL'd)
// and rk:<app> (the app's heat ranking). Multi-key steps are single Lua
// scripts or SET ... GET, so they are atomic against concurrent joins; no
// method walks the keyspace (no KEYS or SCAN). Errors wrap
// persistence.ErrUnavailable. The directory is a read model the room
// grains rebuild (SyncRoom), so nothing here is the truth of a room. It
// must not import actor, delivery or gRPC packages; redistest gives tests a
// key prefix of their own or a private redis-server they may kill.
package redis
