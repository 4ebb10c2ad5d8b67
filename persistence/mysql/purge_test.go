package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestRetentionContractMariaDB(t *testing.T) {
	storetest.RunRetention(t, func(t *testing.T) storetest.RetentionStores {
		cfg, _ := mysqltest.NewDatabase(t)
		room, err := Open(context.Background(), cfg, WithLogger(quiet))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = room.Close() })
		ws, err := OpenWalletStore(context.Background(), cfg)
		if err != nil {
			t.Fatalf("OpenWalletStore: %v", err)
		}
		t.Cleanup(func() { _ = ws.Close() })
		roomMQ, err := Open(context.Background(), cfg, WithLogger(quiet), WithOutboxMQ(true))
		if err != nil {
			t.Fatalf("Open with the MQ fanout: %v", err)
		}
		t.Cleanup(func() { _ = roomMQ.Close() })
		return storetest.RetentionStores{Room: room, Wallet: ws, Notice: newTestNoticeStore(t, cfg), RoomMQ: roomMQ}
	})
}

// Two lock holders are two connections: a lease dies with its holder's
// connection, so a killed node does not keep the table.
func TestPurgeLeaseDiesWithConnection(t *testing.T) {
	s := newTestStore(t, nil)
	lease, held, err := s.AcquirePurgeLease(t.Context(), "room_outbox", "node-a", 0, 0)
	if err != nil || !held {
		t.Fatalf("first lease: held=%v err=%v", held, err)
	}
	// Kill the holder's connection from the server side.
	l := lease.(*sqlLease)
	var id int64
	if err := l.conn.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), "KILL ?", id); err != nil {
		t.Fatalf("KILL: %v", err)
	}
	// KILL returns before the killed thread has let go of its locks, so
	// the lease is given a moment to die.
	var other persistence.PurgeLease
	deadline := time.Now().Add(5 * time.Second)
	for {
		other, held, err = s.AcquirePurgeLease(t.Context(), "room_outbox", "node-b", 0, 0)
		if err != nil || held || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || !held {
		t.Fatalf("lease of a dead connection still held after 5s: held=%v err=%v", held, err)
	}
	other.Release()
	lease.Release() // on a dead connection: must not panic or block
}
