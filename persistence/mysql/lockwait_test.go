package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// holdRoomLock opens a second pool on the store's database (another node)
// and holds the room_fences row of key in an open transaction, as a node
// frozen between two statements of its append would. release ends it.
func holdRoomLock(t *testing.T, dsn, database string, key persistence.RoomKey) (release func()) {
	t.Helper()
	db, err := sql.Open("mysql", dsnWithDB(t, dsn, database))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO room_fences (app_code, room_id, epoch) VALUES (?,?,1)", key.AppCode, key.RoomID); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = tx.Rollback()
			_ = db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

func dsnWithDB(t *testing.T, dsn, database string) string {
	t.Helper()
	dc, _, err := driverConfig(dsn, database, 2*time.Second, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return dc.FormatDSN()
}

// A batch in which one room's row is locked by another transaction (a
// frozen node's) commits every other room's append after one
// innodb_lock_wait_timeout (1 s), and fails only the locked room's, with
// ErrUnavailable and nothing written. Before, the lock wait was retried as
// a deadlock and failed the whole batch.
func TestWriteBatchIsolatesLockWaitVictim(t *testing.T) {
	cfg, database := mysqltest.NewDatabase(t)
	groupCommit(false)(&cfg)
	s, err := Open(t.Context(), cfg, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const rooms = 16
	victim := roomKey(7)
	release := holdRoomLock(t, cfg.DSN, database, victim)

	ps := make([]*pendingAppend, rooms)
	for i := range ps {
		a := testAppend(roomKey(i), 1, fmt.Sprintf("cmd-%d", i), i%3 == 0)
		a.Epoch = 5
		p, err := prepareAppend(a)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	byIndex := append([]*pendingAppend(nil), ps...)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	start := time.Now()
	s.writeBatch(ctx, ps)
	took := time.Since(start)
	for i, p := range byIndex {
		switch {
		case roomKey(i) == victim:
			if !errors.Is(p.err, persistence.ErrUnavailable) {
				t.Errorf("locked room: got %v, want ErrUnavailable", p.err)
			}
		case p.err != nil:
			t.Errorf("room %d (not locked) failed with the victim: %v", i, p.err)
		}
	}
	// One lock wait for the batch statement, one for the victim's own.
	if took > 4*time.Second {
		t.Errorf("batch took %v; want about two 1 s lock waits", took)
	}
	release()
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_command_log"); n != rooms-1 {
		t.Fatalf("log has %d rows, want %d (all but the locked room)", n, rooms-1)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ?", victim.RoomID); n != 0 {
		t.Fatalf("the locked room's failed append left %d outbox rows", n)
	}
	// The victim's append goes through once the lock is gone.
	if err := s.Append(t.Context(), persistence.Append{Command: byIndex[7].a.Command, Epoch: 5}); err != nil {
		t.Fatalf("victim's retry after the lock was released: %v", err)
	}
	t.Logf("batch of %d with one locked room took %v", rooms, took.Round(time.Millisecond))
}

// A room-store session left idle inside a write transaction (its process
// frozen between two statements) is rolled back by the server after
// idle_write_transaction_timeout (2 s, MariaDB): its row locks do not
// outlive the lease of the node that took them, and the room's new owner
// writes after at most that long instead of waiting for the frozen one.
func TestIdleWriteTransactionDoesNotHoldRoomLocks(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	var flavor string
	if err := s.db.QueryRowContext(t.Context(), "SELECT VERSION()").Scan(&flavor); err != nil {
		t.Fatal(err)
	}
	var idle int
	if err := s.db.QueryRowContext(t.Context(), "SELECT @@SESSION.idle_write_transaction_timeout").Scan(&idle); err != nil {
		t.Fatalf("room store session on %s has no idle_write_transaction_timeout: %v", flavor, err)
	}
	if idle != 2 {
		t.Fatalf("idle_write_transaction_timeout = %d on the room store's sessions, want 2", idle)
	}
	key := roomKey(1)
	frozen, err := s.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	if _, err := frozen.Exec("INSERT INTO room_fences (app_code, room_id, epoch) VALUES (?,?,3)", key.AppCode, key.RoomID); err != nil {
		t.Fatal(err)
	}
	// The new owner (epoch 4) appends while the frozen transaction holds
	// the row: it may lose a lock wait or two, then must get through.
	start := time.Now()
	var lastErr error
	for time.Since(start) < 6*time.Second {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		lastErr = s.Append(ctx, persistence.Append{Command: testAppend(key, 1, "new-owner", false).Command, Epoch: 4})
		cancel()
		if lastErr == nil {
			break
		}
		if !errors.Is(lastErr, persistence.ErrUnavailable) {
			t.Fatalf("new owner's append: %v, want success or ErrUnavailable while locked", lastErr)
		}
	}
	took := time.Since(start)
	if lastErr != nil {
		t.Fatalf("new owner still blocked after %v: %v", took, lastErr)
	}
	if took > 4*time.Second {
		t.Errorf("new owner got through after %v; want about idle_write_transaction_timeout (2 s) + one lock wait", took)
	}
	// The frozen transaction was rolled back: its commit fails and its
	// epoch-3 row is not what the fence holds.
	if err := frozen.Commit(); err == nil {
		t.Fatal("the idle transaction committed after the server should have ended it")
	}
	var epoch int64
	if err := s.db.QueryRowContext(t.Context(), "SELECT epoch FROM room_fences WHERE app_code = ? AND room_id = ?", key.AppCode, key.RoomID).Scan(&epoch); err != nil || epoch != 4 {
		t.Fatalf("fence of %s = %d (%v), want 4", key, epoch, err)
	}
	t.Logf("new owner wrote %v after the frozen transaction took the row lock", took.Round(time.Millisecond))
}
