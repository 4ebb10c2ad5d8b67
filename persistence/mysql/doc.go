// Package mysql is the production store on MySQL 8 (and MariaDB 10.6+,
// which CI runs): the room store (Store: command log, outbox, snapshots in
// mysql.room_database, with group commit), plus the wallet and notice
// stores their engineers add here (wallet*.go, notice*.go), and the
// versioned schema migrations all of them share. It owns the SQL of
// schema/<name>/NNN_description.sql, embedded and applied by Migrate
// (GET_LOCK-serialised, recorded per schema in schema_migrations, a
// no-op when run again); deploy/mysql/initdb/01_hyapp_room.sql is
// generated from schema/room by InitDBScript and a test fails when the two
// drift. Adding a schema: create schema/<name>/001_<what>.sql (idempotent
// DDL, CREATE TABLE IF NOT EXISTS; never edit an applied file, add the next
// number), map <name> to its database in DatabaseFor, and call
// MigrateConfig(ctx, cfg, "<name>", database) when cfg.AutoMigrate is set
// (MigrateAll, run by `roomcell migrate`, picks it up by itself). Open
// pools with OpenDB/openDB (READ COMMITTED, strict sql_mode, redacted
// errors) and class driver errors with wrapErr. Errors wrap
// persistence.ErrConflict (duplicate key), ErrUnavailable (unreachable,
// timed out, deadlock) or ErrNotFound, and never carry the DSN's password.
// Tests get a database of their own from mysqltest. This package must not
// import an actor, delivery or gRPC package, except the store contracts
// those packages define (actors/persistence.WalletStore).
package mysql
