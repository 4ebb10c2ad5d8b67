package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// putOutbox writes one pending row of room at seq, created at createdMs,
// leased to lockedBy until lockUntil ("" and 0: free).
func putOutbox(t *testing.T, s *Store, room string, seq, createdMs int64, lockedBy string, lockUntil int64) string {
	t.Helper()
	env := persistence.Envelope{EventID: fmt.Sprintf("app1:%s:%d:0", room, seq), EventType: "RoomUserJoined",
		AppCode: "app1", RoomID: room, RoomSeq: seq, CommandID: fmt.Sprint("c", room, seq), CreatedAtMs: createdMs,
		Payload: []byte(`{"user_id":"u","joined_at_ms":1}`)}
	raw, err := encodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	var by any
	if lockedBy != "" {
		by = lockedBy
	}
	if _, err := s.db.Exec(insertOutbox+"(?,?,?,?,?,?,'pending',0,?,?,0,?,?,0)",
		env.EventID, env.AppCode, env.RoomID, env.RoomSeq, env.EventType, raw, by, lockUntil, createdMs, createdMs); err != nil {
		t.Fatal(err)
	}
	return env.EventID
}

func claimedIDs(rows []persistence.OutboxRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Envelope.EventID
	}
	return ids
}

// Under continuous load the claim serves rooms by the age of their oldest
// due row, not by name: a room whose name sorts last is not starved by
// rooms that keep getting new rows. (The claim used to walk event_id
// order, "app:room:seq:i", i.e. room names.)
func TestClaimServesOldestRoomFirst(t *testing.T) {
	s := newTestStore(t, nil)
	old := putOutbox(t, s, "zz-quiet", 1, 100, "", 0)
	for i := range 20 {
		putOutbox(t, s, fmt.Sprintf("aa-busy-%02d", i), 1, int64(200+i), "", 0)
	}
	got, err := s.ClaimPendingOutbox(t.Context(), "relay", 1000, 500, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids := claimedIDs(got); len(ids) != 1 || ids[0] != old {
		t.Fatalf("claim of 1 took %v, want the oldest row %s", ids, old)
	}
}

// Rooms whose newest rows their publisher holds (leased at insert) and
// whose older rows are due fill the head of the scan; the claim looks past
// them instead of claiming nothing while a free room waits behind them.
// Before, the claim read one window of limit×4 due rows: 20 such rooms
// ahead of a free room starved it for as long as the load went on.
func TestClaimLooksPastHeldRooms(t *testing.T) {
	s := newTestStore(t, nil)
	const now = 10_000
	for i := range 20 {
		room := fmt.Sprintf("held-%02d", i)
		putOutbox(t, s, room, 1, int64(100+i), "", 0)
		putOutbox(t, s, room, 2, int64(5000+i), "room-publisher/x", now+10_000)
	}
	free := putOutbox(t, s, "zz-free", 1, 900, "", 0)
	got, err := s.ClaimPendingOutbox(t.Context(), "relay", now, 500, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ids := claimedIDs(got); len(ids) != 1 || ids[0] != free {
		t.Fatalf("claim of 2 took %v, want only the free room's row %s (every other room is held)", ids, free)
	}
	// And the held rooms stay held: only the free room was leased (a
	// claim leases rooms, room_outbox_leases), no row of a held room.
	var leased int
	if err := s.db.QueryRow("SELECT COUNT(*) FROM room_outbox_leases WHERE locked_by = 'relay' AND room_id = 'zz-free'").Scan(&leased); err != nil || leased != 1 {
		t.Fatalf("%d leases of the free room to the relay (%v), want 1", leased, err)
	}
	if err := s.db.QueryRow("SELECT COUNT(*) FROM room_outbox_leases WHERE room_id <> 'zz-free'").Scan(&leased); err != nil || leased != 0 {
		t.Fatalf("%d held rooms leased (%v), want 0", leased, err)
	}
	if err := s.db.QueryRow("SELECT COUNT(*) FROM room_outbox WHERE locked_by = 'relay'").Scan(&leased); err != nil || leased != 0 {
		t.Fatalf("%d rows leased to the relay one by one (%v), want 0", leased, err)
	}
}

// A claim's transaction holds row locks from its locking read on; a
// claimer frozen there (SIGSTOP, GC, a paused VM) before its first write
// must not hold them past idle_transaction_timeout (2 s): the room's
// publisher claims it after about that long. Before, only write
// transactions had a bound and such a claim held its locks for a whole
// 10 s database pause.
func TestIdleClaimTransactionDoesNotHoldOutboxRows(t *testing.T) {
	s := newTestStore(t, nil)
	var idle int
	if err := s.db.QueryRowContext(t.Context(), "SELECT @@SESSION.idle_transaction_timeout").Scan(&idle); err != nil || idle != 2 {
		t.Fatalf("idle_transaction_timeout = %d (%v) on the room store's sessions, want 2", idle, err)
	}
	id := putOutbox(t, s, "r1", 1, 100, "", 0)
	frozen, err := s.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	var got string
	if err := frozen.QueryRow("SELECT event_id FROM room_outbox WHERE app_code = 'app1' AND room_id = 'r1' AND status = 'pending' ORDER BY room_seq LIMIT 1 FOR UPDATE").Scan(&got); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	key := persistence.RoomKey{AppCode: "app1", RoomID: "r1"}
	var rows []persistence.OutboxRow
	for time.Since(start) < 6*time.Second {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		rows, err = s.ClaimRoomOutbox(ctx, key, "room-publisher/y", time.Now().UnixMilli(), 10_000, 10)
		cancel()
		if err != nil {
			t.Fatalf("claim while another claim's transaction is idle: %v, want nothing (lock wait) or the row", err)
		}
		if len(rows) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	if ids := claimedIDs(rows); len(ids) != 1 || ids[0] != id {
		t.Fatalf("publisher's claim after %v: %v, want %s", took, ids, id)
	}
	if took > 4*time.Second {
		t.Errorf("the idle claim held the room's rows for %v; want about idle_transaction_timeout (2 s) + one lock wait", took)
	}
	t.Logf("the room's rows were free again after %v", took.Round(time.Millisecond))
}
