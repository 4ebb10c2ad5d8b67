package configs

import "time"

// Store kinds.
const (
	StoreMemdb = "memdb"
	StoreMySQL = "mysql"
)

// StoreConfig picks the room/wallet/notice store backend.
type StoreConfig struct {
	Kind string `yaml:"kind"` // memdb (default) | mysql
}

func (c *StoreConfig) setDefaults() {
	if c.Kind == "" {
		c.Kind = StoreMemdb
	}
}

func (c StoreConfig) validate() error {
	if c.Kind != StoreMemdb && c.Kind != StoreMySQL {
		return errorf("store.kind", "unknown store %q (want memdb or mysql)", c.Kind)
	}
	return nil
}

// MySQLConfig is the production store.
type MySQLConfig struct {
	// DSN in go-sql-driver form without a database name, e.g.
	// "root:${MYSQL_PASSWORD}@tcp(127.0.0.1:3306)/". Never logged.
	DSN string `yaml:"dsn"`
	// WalletDSN, if set, is the server of the wallet database (same form
	// as DSN; "" = DSN). Never logged.
	WalletDSN       string        `yaml:"wallet_dsn"`
	RoomDatabase    string        `yaml:"room_database"`
	WalletDatabase  string        `yaml:"wallet_database"`
	NoticeDatabase  string        `yaml:"notice_database"`
	MaxOpenConns    int           `yaml:"max_open_conns"`
	MaxIdleConns    int           `yaml:"max_idle_conns"`
	ConnMaxLifetime time.Duration `yaml:"conn_max_lifetime"`
	DialTimeout     time.Duration `yaml:"dial_timeout"`
	QueryTimeout    time.Duration `yaml:"query_timeout"`
	AutoMigrate     bool          `yaml:"auto_migrate"`
	GroupCommit     GroupCommit   `yaml:"group_commit"`
	// TLS to the server; when enabled it replaces any tls= in the DSN.
	TLS ClientTLSConfig `yaml:"tls"`
	// RoomDBs are room databases besides DSN's, by key; RoomShards
	// lists, per key ("default" is DSN's room_database), the virtual
	// shards (cluster.shards) whose rooms it holds, as ranges "0-511".
	// Both empty: every shard on DSN. See RoomShardMap.
	RoomDBs    map[string]RoomDB   `yaml:"room_dbs"`
	RoomShards map[string][]string `yaml:"room_shards"`
}

// GroupCommit batches appends of many rooms into shared transactions.
type GroupCommit struct {
	Enabled  *bool         `yaml:"enabled"` // default true
	MaxBatch int           `yaml:"max_batch"`
	Linger   time.Duration `yaml:"linger"`
}

// On reports whether group commit is enabled (default true).
func (g GroupCommit) On() bool { return g.Enabled == nil || *g.Enabled }

// Wallet returns the config the wallet store opens: WalletDSN in place
// of DSN when it is set.
func (c MySQLConfig) Wallet() MySQLConfig {
	if c.WalletDSN != "" {
		c.DSN = c.WalletDSN
	}
	return c
}

func (c *MySQLConfig) setDefaults() {
	if c.RoomDatabase == "" {
		c.RoomDatabase = "hyapp_room"
	}
	if c.WalletDatabase == "" {
		c.WalletDatabase = "hyapp_wallet"
	}
	if c.NoticeDatabase == "" {
		c.NoticeDatabase = "hyapp_notice"
	}
	c.MaxOpenConns = intOr(c.MaxOpenConns, 32)
	c.MaxIdleConns = intOr(c.MaxIdleConns, 16)
	c.ConnMaxLifetime = durationOr(c.ConnMaxLifetime, 30*time.Minute)
	c.DialTimeout = durationOr(c.DialTimeout, 2*time.Second)
	c.QueryTimeout = durationOr(c.QueryTimeout, 3*time.Second)
	c.GroupCommit.MaxBatch = intOr(c.GroupCommit.MaxBatch, 128)
	c.GroupCommit.Linger = durationOr(c.GroupCommit.Linger, 2*time.Millisecond)
}

func (c MySQLConfig) validate() error {
	if c.MaxIdleConns > c.MaxOpenConns {
		return errorf("mysql.max_idle_conns", "%d is more than mysql.max_open_conns (%d)", c.MaxIdleConns, c.MaxOpenConns)
	}
	return c.TLS.validate("mysql.tls")
}

// RedisConfig is the room directory (presence, user→room, heat rank).
type RedisConfig struct {
	Enabled   bool          `yaml:"enabled"`
	Addr      string        `yaml:"addr"`
	Password  string        `yaml:"password"` // use ${ENV}; never logged
	DB        int           `yaml:"db"`
	KeyPrefix string        `yaml:"key_prefix"`
	Timeout   time.Duration `yaml:"timeout"`
	// TLS to the server (rediss).
	TLS ClientTLSConfig `yaml:"tls"`
}

func (c *RedisConfig) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:6379"
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "roomcell:"
	}
	c.Timeout = durationOr(c.Timeout, 500*time.Millisecond)
}

func (c RedisConfig) validate() error {
	if c.Enabled {
		if err := checkAddr("redis.addr", c.Addr); err != nil {
			return err
		}
	}
	return c.TLS.validate("redis.tls")
}
