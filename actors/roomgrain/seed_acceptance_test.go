package roomgrain

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// The rows of seed 000's Acceptance Tests table that belong to the command
// path (the sync publish); the worker rows are actors/relay's. Each runs on
// go-memdb and on MariaDB.
func TestSeedSyncPublishRows(t *testing.T) {
	stores := bothStores()
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture, store Store)
	}{
		{"同步IM失败后命令成功", func(t *testing.T, f *fixture, _ Store) {
			pid := f.activate("app/r1")
			f.mustDo(pid, rcCreate("c1", "owner"))
			f.pub.failing.Store(true)
			r := f.mustDo(pid, rcJoin("c2", "bob")) // JoinRoom answers success
			got := f.mustDo(pid, rcGet())
			if r.RoomSeq != 2 || got.RoomSeq != 2 || len(got.Room.Members) != 2 {
				t.Fatalf("room state after a failed sync publish: %+v", got.Room)
			}
		}},
		{"同步IM失败后outbox_pending", func(t *testing.T, f *fixture, store Store) {
			pid := f.activate("app/r1")
			f.mustDo(pid, rcCreate("c1", "owner"))
			// The room's earlier events first: a failure of one of them
			// would (rightly) hold the join back behind it.
			waitFor(t, func() bool {
				st, err := store.(persistence.OutboxStore).OutboxStats(context.Background())
				return err == nil && st.Pending == 0
			})
			f.pub.failing.Store(true)
			r := f.mustDo(pid, rcJoin("c2", "bob"))
			if p := expectPublishOf(t, f, r.EventIds[0]); p.err == nil {
				t.Fatal("the sync publish was expected to fail")
			}
			time.Sleep(50 * time.Millisecond) // a (wrong) mark would land now
			row, err := store.(persistence.OutboxStore).GetOutbox(context.Background(), r.EventIds[0])
			if err != nil || row.Status != persistence.OutboxPending || row.RetryCount != 0 {
				t.Fatalf("row %+v (%v), want pending with retry_count untouched by the sync failure", row, err)
			}
		}},
		{"同步IM成功", func(t *testing.T, f *fixture, store Store) {
			pid := f.activate("app/r1")
			f.mustDo(pid, rcCreate("c1", "owner"))
			r := f.mustDo(pid, rcJoin("c2", "bob"))
			if p := expectPublishOf(t, f, r.EventIds[0]); p.err != nil {
				t.Fatal(p.err)
			}
			os := store.(persistence.OutboxStore)
			waitFor(t, func() bool {
				row, err := os.GetOutbox(context.Background(), r.EventIds[0])
				return err == nil && row.Status == persistence.OutboxPublished
			})
			pending, err := os.ListPendingOutbox(context.Background(), 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pending {
				if p.Envelope.EventID == r.EventIds[0] {
					t.Fatal("a sync-published event is still scanned by the worker")
				}
			}
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					store := s.open(t)
					f := newFixture(t)
					f.deps.Store = store
					row.run(t, f, store)
				})
			}
		})
	}
}

// expectPublishOf waits for the publish attempt of one event.
func expectPublishOf(t *testing.T, f *fixture, eventID string) published {
	t.Helper()
	for {
		p := expect[published](t, f.events, 3*time.Second)
		if p.env.EventID == eventID {
			return p
		}
	}
}

// bothStores opens each backend a room runs on: go-memdb, and MariaDB in
// a database of the test's own.
func bothStores() []struct {
	name string
	open func(t *testing.T) Store
} {
	return []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"memdb", func(*testing.T) Store { return memdb.New() }},
		{"mariadb", func(t *testing.T) Store {
			cfg, _ := mysqltest.NewDatabase(t)
			s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}
