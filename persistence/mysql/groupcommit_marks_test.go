package mysql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// outboxStatus reads one row's status and published_at_ms on the pool
// (another connection than any open transaction's).
func outboxStatus(t testing.TB, s *Store, eventID string) (string, int64) {
	t.Helper()
	var status string
	var at int64
	if err := s.db.QueryRowContext(context.Background(),
		"SELECT status, published_at_ms FROM room_outbox WHERE event_id = ?", eventID).Scan(&status, &at); err != nil {
		t.Fatalf("status of %s: %v", eventID, err)
	}
	return status, at
}

func eventID(key persistence.RoomKey, seq int64, i int) string {
	return fmt.Sprintf("%s:%s:%d:%d", key.AppCode, key.RoomID, seq, i)
}

// A mark queued while appends are written commits in the same transaction
// as the next batch of appends, not in one of its own: inside that
// transaction, before its COMMIT, neither the new append nor the mark is
// visible from outside; after it both are.
func TestPublishedMarkRidesTheNextAppendTransaction(t *testing.T) {
	hold := make(chan struct{})
	var commits atomic.Int32
	var insideSecond struct {
		status string
		logged int
	}
	// One writer: while it holds the first transaction open, the mark and
	// the second append queue up behind it.
	s := newTestStore(t, groupCommit(true), WithGroupCommitWriters(1))
	a, b := roomKey(1), roomKey(2)
	for _, k := range []persistence.RoomKey{a, b} {
		if err := s.Append(t.Context(), testAppend(k, 1, "cmd-1", false)); err != nil {
			t.Fatal(err)
		}
	}
	s.beforeCommit = func() {
		switch commits.Add(1) {
		case 1:
			<-hold // the first writer's transaction stays open
		case 2:
			insideSecond.status, _ = outboxStatus(t, s, eventID(a, 1, 0))
			insideSecond.logged = countRows(t, s, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ? AND seq = 2", b.RoomID)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { errs <- s.Append(t.Context(), testAppend(a, 2, "cmd-2", false)) })
	for s.gc.busy.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() {
		errs <- s.MarkOutboxPublishedBatch(t.Context(), []string{eventID(a, 1, 0), eventID(a, 1, 1)}, 7000)
	})
	wg.Go(func() { errs <- s.Append(t.Context(), testAppend(b, 2, "cmd-2", false)) })
	for start := time.Now(); ; {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the mark and the append never queued behind the open transaction")
		}
		s.gc.markMu.Lock()
		n := len(s.gc.marks)
		s.gc.markMu.Unlock()
		if n == 1 && len(s.gc.queue) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if insideSecond.status != persistence.OutboxPending || insideSecond.logged != 0 {
		t.Fatalf("before the shared COMMIT: mark status %q, append rows %d; want pending and 0 (one transaction)", insideSecond.status, insideSecond.logged)
	}
	for _, id := range []string{eventID(a, 1, 0), eventID(a, 1, 1)} {
		if st, at := outboxStatus(t, s, id); st != persistence.OutboxPublished || at != 7000 {
			t.Fatalf("%s after the shared COMMIT: %s at %d, want published at 7000", id, st, at)
		}
	}
	if st, _ := outboxStatus(t, s, eventID(a, 2, 0)); st != persistence.OutboxPending {
		t.Fatalf("an unmarked row changed: %s", st)
	}
	if n := commits.Load(); n != 2 {
		t.Fatalf("%d append transactions, want 2 (the mark rode the second)", n)
	}
}

// When the shared transaction fails, its marks and its appends are each
// written on their own: a mark whose row another transaction holds past
// innodb_lock_wait_timeout, and an append whose seq is taken, fail
// neither each other nor the batch's other appends.
func TestSharedTransactionFailureFailsNeitherMarksNorAppends(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	ctx := t.Context()
	a, b, c := roomKey(1), roomKey(2), roomKey(3)
	for _, k := range []persistence.RoomKey{a, b, c} {
		if err := s.Append(ctx, testAppend(k, 1, "cmd-1", false)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("mark waits past the lock timeout", func(t *testing.T) {
		// Another transaction holds a marked row for 1.5 s: the shared
		// transaction's mark times out after 1 s and rolls it back; the
		// mark alone then waits for the lock and lands.
		conn, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		var one int
		if err := conn.QueryRowContext(ctx, "SELECT 1 FROM room_outbox WHERE event_id = ? FOR UPDATE", eventID(a, 1, 0)).Scan(&one); err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(1500 * time.Millisecond)
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}()
		p, err := prepareAppend(testAppend(b, 2, "cmd-2", false))
		if err != nil {
			t.Fatal(err)
		}
		m := &queuedMark{ctx: ctx, ids: []string{eventID(a, 1, 0), eventID(c, 1, 0)}, nowMs: 8000}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s.writeShared(wctx, []*pendingAppend{p}, []*queuedMark{m})
		if p.err != nil || m.err != nil {
			t.Fatalf("append: %v, mark: %v; want both written", p.err, m.err)
		}
		for _, id := range m.ids {
			if st, at := outboxStatus(t, s, id); st != persistence.OutboxPublished || at != 8000 {
				t.Fatalf("%s: %s at %d, want published at 8000", id, st, at)
			}
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ? AND seq = 2", b.RoomID); n != 1 {
			t.Fatalf("append rows: %d, want 1", n)
		}
	})

	t.Run("append conflicts", func(t *testing.T) {
		taken, err := prepareAppend(testAppend(c, 1, "cmd-other", false))
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := prepareAppend(testAppend(c, 2, "cmd-2", false))
		if err != nil {
			t.Fatal(err)
		}
		m := &queuedMark{ctx: ctx, ids: []string{eventID(b, 1, 0), eventID(b, 1, 1)}, nowMs: 9000}
		rel := &queuedMark{ctx: ctx, release: true, ids: []string{eventID(c, 1, 1)}}
		s.writeShared(ctx, []*pendingAppend{taken, fresh}, []*queuedMark{m, rel})
		if !errors.Is(taken.err, persistence.ErrConflict) {
			t.Fatalf("taken seq: %v, want ErrConflict", taken.err)
		}
		if fresh.err != nil || m.err != nil || rel.err != nil {
			t.Fatalf("fresh append: %v, mark: %v, release: %v; want all written", fresh.err, m.err, rel.err)
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE event_id = ? AND status = 'pending' AND lock_until_ms = "+released, eventID(c, 1, 1)); n != 1 {
			t.Fatal("the release in the failed shared transaction was not written on its own")
		}
		for _, id := range m.ids {
			if st, at := outboxStatus(t, s, id); st != persistence.OutboxPublished || at != 9000 {
				t.Fatalf("%s: %s at %d, want published at 9000", id, st, at)
			}
		}
	})
}

// Many rooms append and mark their previous command's rows at once, as
// the room publishers do under load: every append and every mark is
// acknowledged only once written, and exactly the marked rows are
// published. Close writes what is queued; a mark after it is refused.
func TestConcurrentMarksAndAppendsThenClose(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	const rooms, cmds = 24, 12
	var wg sync.WaitGroup
	var failed atomic.Int32
	for r := range rooms {
		wg.Go(func() {
			k := roomKey(100 + r)
			for seq := int64(1); seq <= cmds; seq++ {
				if err := s.Append(t.Context(), testAppend(k, seq, fmt.Sprintf("cmd-%d", seq), false)); err != nil {
					t.Errorf("%s seq %d: %v", k, seq, err)
					failed.Add(1)
					return
				}
				if seq == 1 {
					continue
				}
				// Both events of the previous command, and one of them
				// again (a repeated mark changes nothing).
				ids := []string{eventID(k, seq-1, 0), eventID(k, seq-1, 1), eventID(k, seq-1, 0)}
				if err := s.MarkOutboxPublishedBatch(t.Context(), ids, 10000+seq); err != nil {
					t.Errorf("mark %s seq %d: %v", k, seq-1, err)
					failed.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE status = 'published'"); n != rooms*(cmds-1)*2 {
		t.Fatalf("published rows: %d, want %d", n, rooms*(cmds-1)*2)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE status = 'pending' AND room_seq = ?", cmds); n != rooms*2 {
		t.Fatalf("pending rows of the last commands: %d, want %d", n, rooms*2)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE status = 'published' AND published_at_ms <> 10001 + room_seq"); n != 0 {
		t.Fatalf("%d rows carry another mark's time", n)
	}

	k := roomKey(100)
	// Marks queued just before Close are written by it, and none is lost
	// or left waiting.
	var marks sync.WaitGroup
	for i := range 4 {
		marks.Go(func() { _ = s.MarkOutboxPublishedBatch(t.Context(), []string{eventID(k, cmds, i%2)}, 20000) })
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marks.Wait()
	if err := s.MarkOutboxPublishedBatch(t.Context(), []string{eventID(k, cmds, 0)}, 20000); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("mark after Close: %v, want ErrUnavailable", err)
	}
}

// A release gives a publisher's row back in place: the row keeps its
// locked_by (no record rewrite), shows no lease, and another owner's
// claim takes it and its room's later rows at once; a row it was not
// given stays leased.
func TestReleaseInPlaceShowsNoLeaseAndFreesTheRow(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupcommit=%v", on), func(t *testing.T) {
			s := newTestStore(t, groupCommit(on))
			ctx := t.Context()
			k := roomKey(1)
			for seq := int64(1); seq <= 2; seq++ {
				a := testAppend(k, seq, fmt.Sprintf("cmd-%d", seq), false)
				a.Lease = &persistence.OutboxLease{Owner: "room-publisher/1", UntilMs: 1 << 50}
				if err := s.Append(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			all := []string{eventID(k, 1, 0), eventID(k, 1, 1), eventID(k, 2, 0), eventID(k, 2, 1)}
			if err := s.ReleaseOutboxBatch(ctx, all[:2]); err != nil {
				t.Fatal(err)
			}
			for _, id := range all[:2] {
				r, err := s.GetOutbox(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if r.LockedBy != "" || r.LockUntilMs != 0 || r.Status != persistence.OutboxPending || r.RetryCount != 0 {
					t.Fatalf("released row shows %+v", r)
				}
				if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE event_id = ? AND locked_by = 'room-publisher/1'", id); n != 1 {
					t.Fatalf("%s: locked_by was rewritten", id)
				}
			}
			if r, err := s.GetOutbox(ctx, all[2]); err != nil || r.LockedBy != "room-publisher/1" {
				t.Fatalf("a row not released: %+v, %v", r, err)
			}
			// The room's later rows are still the publisher's: a claim
			// takes nothing of the room until they are released too.
			got, err := s.ClaimPendingOutbox(ctx, "relay-b", 5000, 1000, 10)
			if err != nil || len(got) != 0 {
				t.Fatalf("claim while later rows are leased: %d rows, %v", len(got), err)
			}
			if err := s.ReleaseOutboxBatch(ctx, all[2:]); err != nil {
				t.Fatal(err)
			}
			got, err = s.ClaimPendingOutbox(ctx, "relay-b", 5000, 1000, 10)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.Envelope.EventID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(all) {
				t.Fatalf("claim after the releases: %v, want %v", ids, all)
			}
		})
	}
}
