package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// On MySQL every pool a node opens exports its sql.DBStats, by db_name.
func TestMySQLPoolMetrics(t *testing.T) {
	mcfg, database := mysqltest.NewDatabase(t)
	app, _ := startDev(t, func(c *configs.Config) {
		withNotices(c)
		c.Store.Kind = configs.StoreMySQL
		c.MySQL.DSN = mcfg.DSN
		c.MySQL.RoomDatabase, c.MySQL.WalletDatabase, c.MySQL.NoticeDatabase = database, database, database
		c.MySQL.AutoMigrate = true
		c.TencentIM.AllowFake = true
	})
	n, err := testutil.GatherAndCount(app.registry, "go_sql_open_connections", "go_sql_wait_count_total", "go_sql_in_use_connections")
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := app.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "go_sql_open_connections" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "db_name" {
					pools[l.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{"room", "wallet", "notice"} {
		if !pools[want] {
			t.Errorf("no go_sql_open_connections{db_name=%q}: pools %v (%d series)", want, pools, n)
		}
	}
	// The dashboard's MySQL-only families are registered by a MySQL node.
	for _, name := range mysqlOnly {
		if n, err := testutil.GatherAndCount(app.registry, name); err != nil || n == 0 {
			t.Errorf("a MySQL node does not export %s (%d series, %v)", name, n, err)
		}
	}
}
