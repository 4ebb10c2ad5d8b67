package clustertest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/persistence/shardmap"
)

// EnvRoomDBs sets how many room databases a test cluster splits its
// rooms' shards across when Options.RoomDBs is 0 (default 1): `make
// multimember-2db` runs the multi-process suite with 2.
const EnvRoomDBs = "ROOMCELL_TEST_ROOM_DBS"

// EnvMySQLDSN2 is the second MariaDB server (default the :3307 instance
// deploy/local/services.sh starts): a go-sql-driver DSN without a
// database name.
const EnvMySQLDSN2 = "ROOMCELL_TEST_MYSQL_DSN2"

// SecondDSN is the second shared MariaDB server's DSN.
func SecondDSN() string {
	if dsn := os.Getenv(EnvMySQLDSN2); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3307)/"
}

// RoomDB is one room database of a test cluster's shard map.
type RoomDB struct {
	// Key is its key in mysql.room_shards ("default" is mysql.dsn's).
	Key string
	// Config reaches it from the test (DSN, RoomDatabase), not through
	// the namespaces' proxies.
	Config configs.MySQLConfig
	DB     *sql.DB

	once  sync.Once
	store *mysql.Store
	err   error
	// nodeDSN is the server as the nodes reach it ("" for the default
	// database, which is mysql.dsn).
	nodeDSN string
}

// roomDBCount is Options.RoomDBs or $ROOMCELL_TEST_ROOM_DBS.
func roomDBCount(t testing.TB, o Options) int {
	if o.RoomDBs > 0 {
		return o.RoomDBs
	}
	v := os.Getenv(EnvRoomDBs)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("$%s=%q: want a number of room databases, 1 or more", EnvRoomDBs, v)
	}
	return n
}

// addRoomDBs creates the room databases beyond the first, each with a
// name of its own. They alternate between the second shared server and
// the first one, so two databases are on two servers; a test that brings
// its own server (Options.MySQLDSN, to pause it) gets them all on that
// server, so pausing it still reaches every room; Options.RoomDBServer
// puts them on a server of the test's own instead.
func (c *Cluster) addRoomDBs(t testing.TB, o Options) {
	t.Helper()
	n := roomDBCount(t, o)
	first := c.RoomDBs[0].Config.DSN
	for i := 1; i < n; i++ {
		server := first
		if o.MySQLDSN == "" && i%2 == 1 {
			server = SecondDSN()
		}
		if o.RoomDBServer != "" {
			server = o.RoomDBServer
		}
		mcfg, database := mysqltest.NewDatabaseOn(t, server)
		db := openDB(t, mcfg.DSN, database)
		nodeDSN := mcfg.DSN
		if c.Net != nil {
			nodeDSN = c.Net.proxyDSN(t, mcfg.DSN)
		}
		c.RoomDBs = append(c.RoomDBs, &RoomDB{Key: fmt.Sprintf("db%d", i+1), Config: mcfg, DB: db, nodeDSN: nodeDSN})
	}
}

// writeShardMap puts the room databases into a node's configuration:
// the shards (cluster.shards, after the test's Edit) in contiguous equal
// ranges, the first on mysql.dsn's database. A test that wrote its own
// map keeps it.
func (c *Cluster) writeShardMap(t testing.TB, nc *NodeConfig) {
	t.Helper()
	if len(c.RoomDBs) == 1 {
		return
	}
	if _, ok := nc.MySQL["room_shards"]; ok {
		return
	}
	shards := 1024
	if v, ok := nc.Clu["shards"].(int); ok && v > 0 {
		shards = v
	}
	n := len(c.RoomDBs)
	if shards < n {
		t.Fatalf("%d room databases need at least as many shards (cluster.shards is %d)", n, shards)
	}
	dbs := map[string]any{}
	ranges := map[string][]string{}
	for i, rdb := range c.RoomDBs {
		lo, hi := i*shards/n, (i+1)*shards/n-1
		ranges[rdb.Key] = []string{fmt.Sprintf("%d-%d", lo, hi)}
		if i > 0 {
			dbs[rdb.Key] = map[string]any{"dsn": rdb.nodeDSN, "database": rdb.Config.RoomDatabase}
		}
	}
	nc.MySQL["room_dbs"], nc.MySQL["room_shards"] = dbs, ranges
}

// readShardMap keeps the map the nodes resolve from their configuration,
// so the test finds a room's database as they do.
func (c *Cluster) readShardMap(t testing.TB, cfg configs.Config) {
	t.Helper()
	rm, err := cfg.RoomShardMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Keys) != len(c.RoomDBs) {
		t.Fatalf("the nodes' shard map has databases %v; the harness made %d", rm.Keys, len(c.RoomDBs))
	}
	for i, k := range rm.Keys {
		if k != c.RoomDBs[i].Key {
			t.Fatalf("the nodes' shard map has databases %v in another order than the harness's", rm.Keys)
		}
	}
	c.roomMap = shardmap.New(rm)
	if len(rm.Keys) > 1 {
		var where []string
		for i, rdb := range c.RoomDBs {
			where = append(where, fmt.Sprintf("%s=%s/%s %v", rdb.Key, driverAddr(rdb.Config.DSN), rdb.Config.RoomDatabase, cfg.MySQL.RoomShards[rm.Keys[i]]))
		}
		t.Logf("room shards across %d databases: %s", len(rm.Keys), strings.Join(where, ", "))
	}
}

// driverAddr is the server address of dsn, for logs (never the password).
func driverAddr(dsn string) string {
	dc, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		return "?"
	}
	return dc.Addr
}

// RoomDBOf is the database that holds room (of app App).
func (c *Cluster) RoomDBOf(room string) *RoomDB {
	return c.RoomDBs[c.roomMap.Index(App+"/"+room)]
}

// RoomStore opens (once per database) a room store on the database that
// holds room, to read what the nodes wrote.
func (c *Cluster) RoomStore(t testing.TB, room string) *mysql.Store {
	t.Helper()
	rdb := c.RoomDBOf(room)
	rdb.once.Do(func() {
		cfg := rdb.Config
		cfg.AutoMigrate, cfg.MaxOpenConns, cfg.MaxIdleConns = false, 4, 2
		rdb.store, rdb.err = mysql.Open(context.Background(), cfg)
		if rdb.err == nil {
			c.t.Cleanup(func() { rdb.store.Close() })
		}
	})
	if rdb.err != nil {
		t.Fatalf("open room database %s: %v", rdb.Key, rdb.err)
	}
	return rdb.store
}

// eachRoomDB runs q on every room database, with a deadline.
func (c *Cluster) eachRoomDB(t testing.TB, q func(ctx context.Context, rdb *RoomDB) error) {
	t.Helper()
	for _, rdb := range c.RoomDBs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := q(ctx, rdb)
		cancel()
		if err != nil {
			t.Fatalf("room database %s: %v", rdb.Key, err)
		}
	}
}

// openDB opens database on the server of dsn for the test's own
// queries, closed at the test's end.
func openDB(t testing.TB, dsn, database string) *sql.DB {
	t.Helper()
	dc, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dc.DBName = database
	db, err := sql.Open("mysql", dc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// proxyDSN is dsn with its server reached through a proxy on the bridge.
func (nw *Network) proxyDSN(t testing.TB, dsn string) string {
	t.Helper()
	dc, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dc.DBName = ""
	dc.Addr = nw.Proxy(dc.Addr)
	return dc.FormatDSN()
}
