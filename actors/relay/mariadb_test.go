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

// An envelope column that no longer decodes (hand-edited, a bad migration)
// must not stall the relay on MySQL: the store hands the row back with its
// own columns and no payload, the relay parks it, and every other row is
// published.
func TestRelayMariaDBUndecodableEnvelopeColumn(t *testing.T) {
	s := newMariaDB(t).(*mysql.Store)
	insert(t, s, joined(t, "ev-0", clockBase), joined(t, "ev-broken", clockBase+1), joined(t, "ev-2", clockBase+2))
	if _, err := s.DB().Exec(`UPDATE room_outbox SET envelope = '{"room_seq":"not a number"}' WHERE event_id = 'ev-broken'`); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(nil)
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig()})
	eventually(t, "rows around the broken one published", func() bool {
		return published(t, s, "ev-0")() && published(t, s, "ev-2")()
	})
	eventually(t, "broken row parked", func() bool { return get(t, s, "ev-broken").Status == persistence.OutboxParked })
	row := get(t, s, "ev-broken")
	if row.RetryCount != 1 || row.Envelope.EventType != "RoomUserJoined" || pub.attempts("ev-broken") != 0 {
		t.Fatalf("broken row %+v (attempts %d), want parked once, typed from its columns, never sent", row, pub.attempts("ev-broken"))
	}
}
