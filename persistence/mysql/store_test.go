package mysql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/persistence/storetest"
)

var quiet = slog.New(slog.DiscardHandler)

// groupCommit returns a config edit that turns group commit on or off.
func groupCommit(on bool) func(*configs.MySQLConfig) {
	return func(c *configs.MySQLConfig) { c.GroupCommit.Enabled = &on }
}

// newTestStore opens a store on a database of its own (dropped after the
// test, once the store is closed).
func newTestStore(t testing.TB, edit func(*configs.MySQLConfig), opts ...Option) *Store {
	t.Helper()
	cfg, _ := mysqltest.NewDatabase(t)
	if edit != nil {
		edit(&cfg)
	}
	s, err := Open(context.Background(), cfg, append([]Option{WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestRoomStoreContract(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupcommit=%v", on), func(t *testing.T) {
			storetest.RunRoomStore(t, func(t *testing.T) persistence.Store {
				return newTestStore(t, groupCommit(on))
			})
		})
	}
}

func TestRoomFenceContract(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupcommit=%v", on), func(t *testing.T) {
			storetest.RunRoomFence(t, func(t *testing.T) persistence.Store {
				return newTestStore(t, groupCommit(on))
			})
		})
	}
}

func TestOutboxStoreContract(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupcommit=%v", on), func(t *testing.T) {
			storetest.RunOutboxStore(t, func(t *testing.T) persistence.Store {
				return newTestStore(t, groupCommit(on))
			})
		})
	}
}

func TestOutboxMQContractMariaDB(t *testing.T) {
	storetest.RunOutboxMQ(t, func(t *testing.T) persistence.Store { return newTestStore(t, nil, WithOutboxMQ(true)) },
		func(t *testing.T) persistence.Store { return newTestStore(t, nil) })
}

// testAppend is a command like the grain's: two events, a reply, and a
// snapshot when withSnap.
func testAppend(key persistence.RoomKey, seq int64, commandID string, withSnap bool) persistence.Append {
	ev := func(i int) persistence.Envelope {
		return persistence.Envelope{
			EventID: fmt.Sprintf("%s:%s:%d:%d", key.AppCode, key.RoomID, seq, i), EventType: "RoomGiftSent",
			AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CommandID: commandID, CreatedAtMs: 1000 + seq,
			Payload: json.RawMessage(fmt.Sprintf(`{"from_user_id":"u1","gift_id":"rose","n":%d}`, i)),
		}
	}
	a := persistence.Append{Command: persistence.CommandRecord{
		AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: commandID, CommandType: "SendGift",
		Reply: []byte(fmt.Sprintf("reply-%s", commandID)), Events: []persistence.Envelope{ev(0), ev(1)}, CreatedAtMs: 1000 + seq,
	}}
	if withSnap {
		a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, State: []byte(fmt.Sprintf("state@%d", seq)), UpdatedAtMs: 1000 + seq}
	}
	return a
}

func roomKey(i int) persistence.RoomKey {
	return persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("room-%03d", i)}
}

func countRows(t testing.TB, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Two stores on one database stand for two activations of a room on two
// nodes. For every seq both try; exactly one wins it, the other gets
// ErrConflict, and the log holds the winner's command. Appends of other
// rooms ride in the same group-commit batches and all succeed.
func TestFencingTwoWritersOneRoom(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	var stores [2]*Store
	for i := range stores {
		s, err := Open(context.Background(), cfg, WithLogger(quiet))
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	ctx := t.Context()
	contested := persistence.RoomKey{AppCode: "app", RoomID: "contested"}
	const seqs, others = 40, 8
	for seq := int64(1); seq <= seqs; seq++ {
		var wg sync.WaitGroup
		var errs [2]error
		var otherErrs [2][others]error
		for w := range stores {
			wg.Go(func() {
				errs[w] = stores[w].Append(ctx, testAppend(contested, seq, fmt.Sprintf("w%d-seq%d", w, seq), seq%5 == 0))
			})
			for o := range others {
				wg.Go(func() {
					otherErrs[w][o] = stores[w].Append(ctx, testAppend(roomKey(w*others+o), seq, fmt.Sprintf("cmd-%d", seq), false))
				})
			}
		}
		wg.Wait()
		winners := 0
		for w, err := range errs {
			switch {
			case err == nil:
				winners++
			case !errors.Is(err, persistence.ErrConflict):
				t.Fatalf("seq %d writer %d: got %v, want success or ErrConflict", seq, w, err)
			}
		}
		if winners != 1 {
			t.Fatalf("seq %d: %d writers won, want exactly 1 (errors %v)", seq, winners, errs)
		}
		for w := range otherErrs {
			for o, err := range otherErrs[w] {
				if err != nil {
					t.Fatalf("seq %d: append of uncontested %s failed: %v", seq, roomKey(w*others+o), err)
				}
			}
		}
	}
	log, err := stores[0].LoadCommands(ctx, contested, 0)
	if err != nil {
		t.Fatalf("LoadCommands: %v", err)
	}
	if len(log) != seqs {
		t.Fatalf("log of the contested room has %d rows, want %d", len(log), seqs)
	}
	if n := countRows(t, stores[0], "SELECT COUNT(*) FROM room_outbox WHERE room_id = 'contested'"); n != 2*seqs {
		t.Fatalf("outbox of the contested room has %d rows, want %d (two per winning command)", n, 2*seqs)
	}
	for _, r := range log {
		for _, e := range r.Events {
			if e.CommandID != r.CommandID {
				t.Fatalf("seq %d: command %s but outbox envelope of %s", r.Seq, r.CommandID, e.CommandID)
			}
		}
	}
	st := stores[0].GroupCommitStats()
	if st.Appends == 0 || st.Batches >= st.Appends {
		t.Fatalf("group commit never shared a transaction: %+v", st)
	}
	// The batch-size histogram sees every batch and every append the
	// counters do.
	reg := prometheus.NewRegistry()
	reg.MustRegister(stores[0].Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sizes *dto.Histogram
	for _, mf := range mfs {
		if mf.GetName() == "roomcell_mysql_group_commit_batch_size" {
			sizes = mf.GetMetric()[0].GetHistogram()
		}
	}
	if sizes == nil || int64(sizes.GetSampleCount()) != st.Batches || int64(sizes.GetSampleSum()) != st.Appends {
		t.Fatalf("batch size histogram %v, counters %+v: want count = batches and sum = appends", sizes, st)
	}
}

// writeBatch is the group committer's transaction. A batch mixing clean
// appends with ones that break the fence (a seq already stored, a seq
// taken twice inside the batch, a command_id already used, an outbox
// event_id already used) commits the clean ones and only those.
func TestWriteBatchIsolatesConflicts(t *testing.T) {
	s := newTestStore(t, groupCommit(false))
	ctx := t.Context()
	if err := s.Append(ctx, testAppend(roomKey(0), 1, "taken", true)); err != nil {
		t.Fatal(err)
	}
	dupEvent := testAppend(roomKey(7), 1, "dup-event", false)
	dupEvent.Command.Events[1].EventID = "app:room-000:1:0" // room 0's event
	batch := []persistence.Append{
		testAppend(roomKey(1), 1, "a", true),
		testAppend(roomKey(0), 1, "seq-taken", true), // conflict: seq 1 of room 0 is stored
		testAppend(roomKey(2), 1, "b", false),
		testAppend(roomKey(3), 1, "c", false),
		testAppend(roomKey(3), 1, "c-again", false), // conflict: seq taken earlier in this batch
		testAppend(roomKey(0), 2, "taken", false),   // conflict: command_id of room 0 is stored
		dupEvent, // conflict: event_id is stored
		testAppend(roomKey(4), 1, "d", true),
	}
	wantConflict := map[int]bool{1: true, 4: true, 5: true, 6: true}
	ps := make([]*pendingAppend, len(batch))
	for i, a := range batch {
		p, err := prepareAppend(a)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	byIndex := append([]*pendingAppend(nil), ps...) // writeBatch sorts its argument
	s.writeBatch(ctx, ps)
	for i, p := range byIndex {
		if wantConflict[i] != errors.Is(p.err, persistence.ErrConflict) || (!wantConflict[i] && p.err != nil) {
			t.Errorf("append %d (%s seq %d %s): got %v, want conflict=%v", i, p.a.Command.Key(), p.a.Command.Seq, p.a.Command.CommandID, p.err, wantConflict[i])
		}
	}
	for i, a := range batch {
		c, err := s.FindCommand(ctx, a.Command.Key(), a.Command.CommandID)
		switch {
		case wantConflict[i] && err == nil && c.Seq == a.Command.Seq:
			t.Errorf("conflicting append %d was written: %+v", i, c)
		case !wantConflict[i] && err != nil:
			t.Errorf("clean append %d not written: %v", i, err)
		}
	}
	// Room 0 keeps its first command and snapshot; room 7 has nothing.
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_command_log WHERE room_id IN ('room-000', 'room-007')"); n != 1 {
		t.Fatalf("rooms 0 and 7 have %d log rows, want 1", n)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox WHERE room_id = 'room-007'"); n != 0 {
		t.Fatalf("the rejected append of room 7 left %d outbox rows", n)
	}
	snap, err := s.LoadSnapshot(ctx, roomKey(0))
	if err != nil || string(snap.State) != "state@1" {
		t.Fatalf("room 0 snapshot: %+v %v", snap, err)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox"); n != 2*5 {
		t.Fatalf("outbox has %d rows, want 10 (room 0's first command and the 4 clean appends)", n)
	}
}

// A batch that fails at COMMIT acknowledges nobody: every append of it gets
// ErrUnavailable and nothing of it is in the tables.
func TestFailedCommitFailsWholeBatch(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	p := startProxy(t, cfg.DSN)
	cfg.DSN = p.DSN()
	s, err := Open(t.Context(), cfg, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var once sync.Once
	s.beforeCommit = func() { once.Do(p.Cut) }
	ps := make([]*pendingAppend, 6)
	for i := range ps {
		ps[i], _ = prepareAppend(testAppend(roomKey(i), 1, "cmd", i%2 == 0))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s.writeBatch(ctx, ps)
	for i, p := range ps {
		if !errors.Is(p.err, persistence.ErrUnavailable) {
			t.Errorf("append %d after a failed commit: got %v, want ErrUnavailable", i, p.err)
		}
	}
	s.beforeCommit = nil
	p.Restore()
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_command_log"); n != 0 {
		t.Fatalf("a batch whose COMMIT failed left %d log rows", n)
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox"); n != 0 {
		t.Fatalf("a batch whose COMMIT failed left %d outbox rows", n)
	}
}

// A caller whose deadline passes while its append waits in the queue gets
// ErrUnavailable on time, and the append is not written later.
func TestGroupCommitQueueHonoursDeadline(t *testing.T) {
	s := newTestStore(t, groupCommit(true), WithGroupCommitWriters(1))
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s.beforeCommit = func() {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}
	blocker := make(chan error, 1)
	go func() { blocker <- s.Append(context.Background(), testAppend(roomKey(1), 1, "blocker", false)) }()
	<-entered // the only writer is now stuck before its COMMIT

	const deadline = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	err := s.Append(ctx, testAppend(roomKey(2), 1, "late", false))
	took := time.Since(start)
	if !errors.Is(err, persistence.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued append past its deadline: got %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if took > deadline+150*time.Millisecond {
		t.Fatalf("queued append answered after %v, deadline %v", took, deadline)
	}
	s.beforeCommit = nil
	close(release)
	if err := <-blocker; err != nil {
		t.Fatalf("blocking append: %v", err)
	}
	// Flush whatever is queued, then check the abandoned append is absent.
	if err := s.Append(t.Context(), testAppend(roomKey(3), 1, "after", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FindCommand(t.Context(), roomKey(2), "late"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("an append abandoned in the queue was written (FindCommand: %v)", err)
	}
}

// Close answers every queued append after writing it, then refuses more.
func TestCloseDrainsQueue(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	s, err := Open(t.Context(), cfg, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make(chan error, n)
	var started sync.WaitGroup
	for i := range n {
		started.Add(1)
		go func() {
			started.Done()
			errs <- s.Append(context.Background(), testAppend(roomKey(i), 1, "cmd", false))
		}()
	}
	started.Wait()
	time.Sleep(5 * time.Millisecond) // let most of them reach the queue
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ok := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			ok++
		case !errors.Is(err, persistence.ErrUnavailable):
			t.Fatalf("append racing Close: got %v, want success or ErrUnavailable", err)
		}
	}
	if err := s.Append(context.Background(), testAppend(roomKey(999), 1, "x", false)); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("Append after Close: got %v, want ErrUnavailable", err)
	}
	if _, err := s.LoadSnapshot(context.Background(), roomKey(1)); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("LoadSnapshot after Close: got %v, want ErrUnavailable", err)
	}
	check, err := OpenDB(t.Context(), cfg, cfg.RoomDatabase)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var rows int
	if err := check.QueryRow("SELECT COUNT(*) FROM room_command_log").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != ok {
		t.Fatalf("%d appends succeeded but the log has %d rows", ok, rows)
	}
	if ok == 0 {
		t.Fatal("Close drained nothing: no append racing it succeeded")
	}
}

func TestAppendRejectsWhatColumnsCannotHold(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	long := func(n int) string { return string(make([]byte, n)) }
	for name, edit := range map[string]func(*persistence.Append){
		"no app_code":      func(a *persistence.Append) { a.Command.AppCode = "" },
		"no command_id":    func(a *persistence.Append) { a.Command.CommandID = "" },
		"long room_id":     func(a *persistence.Append) { a.Command.RoomID = long(maxRoomID + 1) },
		"no event_id":      func(a *persistence.Append) { a.Command.Events[0].EventID = "" },
		"long event_id":    func(a *persistence.Append) { a.Command.Events[0].EventID = long(maxEventID + 1) },
		"bad payload":      func(a *persistence.Append) { a.Command.Events[0].Payload = json.RawMessage("{not json") },
		"snapshot no room": func(a *persistence.Append) { a.Snapshot.RoomID = "" },
	} {
		a := testAppend(roomKey(1), 1, "cmd", true)
		edit(&a)
		if err := s.Append(t.Context(), a); !errors.Is(err, errInvalid) {
			t.Errorf("%s: got %v, want errInvalid", name, err)
		}
	}
	if err := s.Append(t.Context(), testAppend(roomKey(1), 1, "cmd", true)); err != nil {
		t.Fatalf("a valid append after rejected ones: %v", err)
	}
	// A room ID of exactly the column size fits, in characters, not bytes.
	wide := persistence.RoomKey{AppCode: "app", RoomID: repeatRune('房', maxRoomID)}
	if err := s.Append(t.Context(), testAppend(wide, 1, "cmd", true)); err != nil {
		t.Fatalf("append with a %d-character room_id: %v", maxRoomID, err)
	}
	if got, err := s.LoadCommands(t.Context(), wide, 0); err != nil || len(got) != 1 || got[0].RoomID != wide.RoomID {
		t.Fatalf("LoadCommands of the wide room: %v %v", got, err)
	}
}

func repeatRune(r rune, n int) string {
	out := make([]rune, n)
	for i := range out {
		out[i] = r
	}
	return string(out)
}

func TestPayloadRoundTripsByteForByte(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	a := testAppend(roomKey(1), 1, "cmd", false)
	// Key order, HTML characters and unicode survive as written.
	a.Command.Events[0].Payload = json.RawMessage(`{"z":1,"a":"<b>&é","m":[1,2]}`)
	a.Command.Events[1].Payload = nil
	if err := s.Append(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	row, err := s.GetOutbox(t.Context(), a.Command.Events[0].EventID)
	if err != nil {
		t.Fatal(err)
	}
	if string(row.Envelope.Payload) != `{"z":1,"a":"<b>&é","m":[1,2]}` {
		t.Fatalf("payload came back as %s", row.Envelope.Payload)
	}
	log, err := s.LoadCommands(t.Context(), roomKey(1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(log[0].Events[0].Payload) != string(a.Command.Events[0].Payload) || log[0].Events[1].Payload != nil {
		t.Fatalf("log events came back as %s / %s", log[0].Events[0].Payload, log[0].Events[1].Payload)
	}
}

func TestMarkFailedTruncatesLastError(t *testing.T) {
	s := newTestStore(t, groupCommit(false))
	a := testAppend(roomKey(1), 1, "cmd", false)
	if err := s.Append(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	id := a.Command.Events[0].EventID
	msg := repeatRune('错', maxLastError+10)
	if err := s.MarkOutboxFailed(t.Context(), id, msg, 2000, 2000); err != nil {
		t.Fatal(err)
	}
	row, err := s.GetOutbox(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := []rune(row.LastError); len(got) != maxLastError || row.RetryCount != 1 {
		t.Fatalf("last_error has %d characters, retry_count %d; want %d and 1", len(got), row.RetryCount, maxLastError)
	}
}

// The claim query must walk idx_room_outbox_pending in order, not sort.
func TestClaimQueryUsesPendingIndexWithoutSort(t *testing.T) {
	s := newTestStore(t, groupCommit(true))
	ctx := t.Context()
	var wg sync.WaitGroup
	for r := range 20 {
		wg.Go(func() {
			for seq := int64(1); seq <= 50; seq++ {
				if err := s.Append(ctx, testAppend(roomKey(r), seq, fmt.Sprintf("c%d", seq), false)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := s.db.ExecContext(ctx, "UPDATE room_outbox SET status = 'published' WHERE room_seq <= 45"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE TABLE room_outbox"); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, "EXPLAIN SELECT "+outboxColumns+" FROM room_outbox WHERE status = 'pending' AND lock_until_ms <= 5000"+
		" ORDER BY created_at_ms, event_id LIMIT 100 FOR UPDATE SKIP LOCKED")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	plans := 0
	for rows.Next() {
		plans++
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		plan := map[string]string{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				plan[c] = string(b)
			}
		}
		if plan["key"] != "idx_room_outbox_pending" {
			t.Errorf("claim uses key %q, want idx_room_outbox_pending (plan %v)", plan["key"], plan)
		}
		if strings.Contains(plan["Extra"], "filesort") {
			t.Errorf("claim sorts: %v", plan)
		}
	}
	if err := rows.Err(); err != nil || plans != 1 {
		t.Fatalf("EXPLAIN returned %d rows (%v), want 1", plans, err)
	}
}

func TestCommandRangeContract(t *testing.T) {
	storetest.RunCommandRange(t, func(t *testing.T) storetest.CommandRanger { return newTestStore(t, nil) })
}
