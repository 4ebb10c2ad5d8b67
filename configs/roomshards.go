package configs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultRoomDB is the shard map's key of mysql.dsn's room database.
const DefaultRoomDB = "default"

// RoomDB is a room database besides mysql.dsn's (mysql.room_dbs.KEY).
type RoomDB struct {
	// DSN of its server, same form as mysql.dsn. Never logged.
	DSN string `yaml:"dsn"`
	// Database on that server; "" = mysql.room_database.
	Database string `yaml:"database"`
}

// RoomShardMap is mysql.room_dbs and mysql.room_shards resolved: which
// room database holds each virtual shard (cluster.shards of them).
type RoomShardMap struct {
	// Keys are the databases, DefaultRoomDB first when it holds shards,
	// then the others in name order.
	Keys []string
	// Configs[i] is Keys[i]'s MySQL config: mysql with its DSN and
	// room_database.
	Configs []MySQLConfig
	// Owner[shard] indexes Keys.
	Owner []int
}

// Single reports whether every shard is on one database.
func (m RoomShardMap) Single() bool { return len(m.Keys) == 1 }

// RoomShardMap resolves the room shard map. Without mysql.room_dbs and
// mysql.room_shards every shard is on mysql.dsn (DefaultRoomDB), so a
// configuration that predates the map loads unchanged. Otherwise every
// shard must be in exactly one database, every key of room_shards must
// be "default" or a key of room_dbs, and every room_dbs key must hold a
// shard: a shard nobody holds, or held twice, would lose rooms or fork
// them, so the process refuses to start instead.
func (c Config) RoomShardMap() (RoomShardMap, error) {
	shards := c.Cluster.Shards
	if shards <= 0 {
		shards = 1024
	}
	my := c.MySQL
	if len(my.RoomDBs) == 0 && len(my.RoomShards) == 0 {
		return RoomShardMap{Keys: []string{DefaultRoomDB}, Configs: []MySQLConfig{my}, Owner: make([]int, shards)}, nil
	}
	if c.Store.Kind != StoreMySQL {
		return RoomShardMap{}, errorf("mysql.room_shards", "a shard map needs store.kind mysql (store.kind is %q)", c.Store.Kind)
	}
	if len(my.RoomShards) == 0 {
		return RoomShardMap{}, errorf("mysql.room_shards", "required with mysql.room_dbs: say which shards each database holds")
	}
	known := []string{DefaultRoomDB}
	for k, db := range my.RoomDBs {
		if k == DefaultRoomDB {
			return RoomShardMap{}, errorf("mysql.room_dbs."+k, "%q is mysql.dsn's key; name the other databases otherwise", k)
		}
		if db.DSN == "" {
			return RoomShardMap{}, errorf("mysql.room_dbs."+k+".dsn", "required")
		}
		known = append(known, k)
	}
	slices.Sort(known[1:])
	var unknown []string
	for k := range my.RoomShards {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return RoomShardMap{}, errorf("mysql.room_shards", "unknown database key(s) %s (known: %s)",
			strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	m := RoomShardMap{Owner: make([]int, shards)}
	for i := range m.Owner {
		m.Owner[i] = -1
	}
	where := map[string]string{} // "server/database" → key, for the same database named twice
	for _, k := range known {
		ranges, ok := my.RoomShards[k]
		if !ok {
			if k == DefaultRoomDB {
				continue // mysql.dsn may hold no room shard at all
			}
			return RoomShardMap{}, errorf("mysql.room_dbs."+k, "holds no shard: add it to mysql.room_shards or remove it")
		}
		cfg := my
		if k != DefaultRoomDB {
			cfg.DSN = my.RoomDBs[k].DSN
			if d := my.RoomDBs[k].Database; d != "" {
				cfg.RoomDatabase = d
			}
		}
		id := cfg.DSN + "\x00" + cfg.RoomDatabase
		if other, dup := where[id]; dup {
			return RoomShardMap{}, errorf("mysql.room_dbs."+k, "same server and database as %q", other)
		}
		where[id] = k
		idx := len(m.Keys)
		m.Keys, m.Configs = append(m.Keys, k), append(m.Configs, cfg)
		key := "mysql.room_shards." + k
		if len(ranges) == 0 {
			return RoomShardMap{}, errorf(key, "empty: list shard ranges such as \"0-511\"")
		}
		for i, r := range ranges {
			lo, hi, err := parseShardRange(r, shards)
			if err != nil {
				return RoomShardMap{}, errorf(fmt.Sprintf("%s[%d]", key, i), "%v", err)
			}
			for s := lo; s <= hi; s++ {
				if o := m.Owner[s]; o >= 0 {
					return RoomShardMap{}, errorf(fmt.Sprintf("%s[%d]", key, i), "shard %d is already in %q", s, m.Keys[o])
				}
				m.Owner[s] = idx
			}
		}
	}
	if missing := unmapped(m.Owner); missing != "" {
		return RoomShardMap{}, errorf("mysql.room_shards", "shards %s are in no database (cluster.shards is %d)", missing, shards)
	}
	return m, nil
}

// parseShardRange reads "LO-HI" or "N" within [0, shards).
func parseShardRange(r string, shards int) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(r), "-")
	if lo, err = strconv.Atoi(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("%q: want a shard or a range LO-HI", r)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Errorf("%q: want a shard or a range LO-HI", r)
		}
	}
	if lo < 0 || hi >= shards || lo > hi {
		return 0, 0, fmt.Errorf("%q: not a range within 0-%d (cluster.shards)", r, shards-1)
	}
	return lo, hi, nil
}

// unmapped lists the shards without an owner as ranges ("" if none),
// at most a few of them.
func unmapped(owner []int) string {
	var out []string
	for s := 0; s < len(owner); s++ {
		if owner[s] >= 0 {
			continue
		}
		e := s
		for e+1 < len(owner) && owner[e+1] < 0 {
			e++
		}
		if e == s {
			out = append(out, strconv.Itoa(s))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", s, e))
		}
		s = e
		if len(out) == 5 {
			out = append(out, "…")
			break
		}
	}
	return strings.Join(out, ", ")
}
