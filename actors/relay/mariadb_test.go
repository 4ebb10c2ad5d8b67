package relay

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// newMariaDB opens the MySQL store on a throwaway database of the local
// MariaDB (dropped at the end of the test).
func newMariaDB(t *testing.T) persistence.Store {
	t.Helper()
	cfg, _ := mysqltest.NewDatabase(t)
	s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRelayMariaDB(t *testing.T) {
	runSuite(t, storeCase{name: "mariadb", new: newMariaDB})
}

// BenchmarkRelayMariaDB is BenchmarkRelay on the local MariaDB with a
// backlog of 2000 rows.
func BenchmarkRelayMariaDB(b *testing.B) {
	benchmarkDrain(b, 2000, func(b *testing.B) persistence.Store {
		cfg, _ := mysqltest.NewDatabase(b)
		s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
