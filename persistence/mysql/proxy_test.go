package mysql

import (
	"testing"

	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// startProxy is mysqltest.StartProxy: the cuttable relay now lives there
// so tests of other packages (the gift chaos test) can cut a database too.
func startProxy(t testing.TB, dsn string) *mysqltest.Proxy { return mysqltest.StartProxy(t, dsn) }
