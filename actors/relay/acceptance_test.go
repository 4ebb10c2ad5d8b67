package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/supervise/supervisetest"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// storeCase is one backend the suite runs on.
type storeCase struct {
	name string
	new  func(t *testing.T) persistence.Store
}

// suite is every relay test that goes through a store: the worker rows of
// seed 000's Acceptance Tests table (named as in the seed) and the relay's
// own guarantees beyond it. Each backend runs all of it.
var suite = []struct {
	name string
	run  func(t *testing.T, s persistence.Store)
}{
	// Seed 000, Acceptance Tests.
	{"worker补投成功", testWorkerRepublishes},
	{"worker补投失败", testWorkerFailureKeepsPending},
	{"下一轮成功", testNextRoundSucceeds},
	{"worker_cancel", testWorkerCancel},
	{"非IM事件", testNonIMEventsMarkedPublished},
	// Beyond the table.
	{"batch_continues_after_failure", testBatchContinuesAfterFailure},
	{"corrupt_envelope_parked", testCorruptEnvelopeParked},
	{"two_relays_claim_disjoint_rows", testTwoRelaysDisjoint},
	{"crashed_relay_rows_come_back", testCrashedRelayLeaseExpires},
	{"panic_restarts_row_stays_pending", testPanicRestarts},
	{"ticks_do_not_multiply_after_restarts", testTicksDoNotMultiply},
	{"exponential_delays_and_caps", testExponentialInStore},
	{"poison_waits_for_inflight_publish", testPoisonWaitsForInFlight},
	{"run_now_and_requeue", testRunNowForcesRetry},
	{"backlog_drains_without_waiting_for_poll", testBacklogDrains},
	{"many_events_of_one_command_in_index_order", testManyEventsInIndexOrder},
}

// A command of 25 events (a batch ban, a full room closed) reaches IM in
// the command's order, never in the order of its ids' text (room.EventID
// ends with the index: ":10" sorts before ":2"), while claims of 7 rows cut
// the commands anywhere and two relays take rooms from each other.
func testManyEventsInIndexOrder(t *testing.T, s persistence.Store) {
	const rooms, commands, perCommand = 3, 2, 25
	want := map[string][]string{}
	for r := range rooms {
		roomID := fmt.Sprint("big-", r)
		for c := range commands {
			seq := int64(c + 1)
			rec := persistence.CommandRecord{AppCode: "app", RoomID: roomID, Seq: seq, CommandID: fmt.Sprint(roomID, "-", seq),
				CommandType: "Test", Reply: []byte(`{}`), CreatedAtMs: clockBase + int64(c)}
			for i := range perCommand {
				e := joined(t, room.EventID("app", roomID, seq, i), rec.CreatedAtMs)
				e.RoomID, e.RoomSeq, e.CommandID = roomID, seq, rec.CommandID
				rec.Events = append(rec.Events, e)
				want[roomID] = append(want[roomID], e.EventID)
			}
			if err := s.Append(context.Background(), persistence.Append{Command: rec}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub := newPublisher(nil)
	sys := newSystem(t)
	for _, node := range []string{"n1", "n2"} {
		startRelay(t, sys, Deps{Store: s, Publisher: pub, NodeID: node, Config: testConfig(func(c *configs.OutboxWorkerConfig) {
			c.BatchSize, c.HotRoomBatch = 7, 7
		})})
	}
	eventually(t, "every event sent", func() bool { return pub.total() == rooms*commands*perCommand })
	pub.mu.Lock()
	got := map[string][]string{}
	for _, id := range pub.order {
		roomID := id[len("app:") : len("app:")+len("big-0")]
		got[roomID] = append(got[roomID], id)
	}
	pub.mu.Unlock()
	for roomID, ids := range want {
		if !slices.Equal(got[roomID], ids) {
			t.Fatalf("room %s reached IM as\n%q\nwant\n%q", roomID, got[roomID], ids)
		}
	}
}

func runSuite(t *testing.T, sc storeCase) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, sc.new(t)) })
	}
}

func TestRelayMemDB(t *testing.T) {
	runSuite(t, storeCase{name: "memdb", new: newMemDB})
}

// worker 补投成功: the fake publisher gets the same event_id, the row is
// published. poll_interval is an hour: only the batch Started runs at once
// can have done it.
func testWorkerRepublishes(t *testing.T, s persistence.Store) {
	insert(t, s, joined(t, "ev-1", clockBase))
	pub := newPublisher(nil)
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PollInterval = time.Hour })})

	select {
	case id := <-pub.calls:
		if id != "ev-1" {
			t.Fatalf("published %q, want ev-1", id)
		}
	case <-time.After(waitFor):
		t.Fatal("relay did not publish the pending event")
	}
	eventually(t, "ev-1 published", published(t, s, "ev-1"))
	row := get(t, s, "ev-1")
	if row.LastError != "" || row.RetryCount != 0 || row.PublishedAtMs == 0 || row.LockedBy != "" {
		t.Fatalf("published row = %+v, want last_error empty, retry_count 0, published_at set, no lease", row)
	}
	if n := pub.attempts("ev-1"); n != 1 {
		t.Fatalf("ev-1 published %d times, want 1", n)
	}
}

// worker 补投失败: the row stays pending, retry_count+1, last_error set;
// and again on the next round (infinite retries, never dropped).
func testWorkerFailureKeepsPending(t *testing.T, s persistence.Store) {
	insert(t, s, joined(t, "ev-1", clockBase))
	pub := newPublisher(func(context.Context, persistence.Envelope, int) error {
		return errors.New("tencent im: send_group_system_notification: ErrorCode 10007 (retryable)")
	})
	clock := newClock()
	deps := Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(), Clock: clock.Now}
	for round := 1; round <= 3; round++ {
		res, err := ProcessBatch(context.Background(), deps)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 1 || res.Published != 0 {
			t.Fatalf("round %d: %+v, want 1 failed", round, res)
		}
		// fixed_interval: due again one poll_interval later, not before.
		if row := get(t, s, "ev-1"); row.NextRetryAtMs != clock.Now().Add(deps.Config.PollInterval).UnixMilli() {
			t.Fatalf("round %d: next_retry_at_ms %d, want now + poll_interval", round, row.NextRetryAtMs)
		}
		if early, err := ProcessBatch(context.Background(), deps); err != nil || early.Claimed != 0 {
			t.Fatalf("round %d: a batch before the due time claimed %+v (%v)", round, early, err)
		}
		clock.Add(deps.Config.PollInterval)
		row := get(t, s, "ev-1")
		if row.Status != persistence.OutboxPending || row.RetryCount != round {
			t.Fatalf("round %d: status %s retry_count %d, want pending %d", round, row.Status, row.RetryCount, round)
		}
		if !strings.Contains(row.LastError, "ErrorCode 10007") {
			t.Fatalf("last_error = %q, want the publish error", row.LastError)
		}
		if row.LockedBy != "" {
			t.Fatalf("failed row still leased to %q", row.LockedBy)
		}
	}
}

// 下一轮成功: first attempt fails, the next poll's succeeds: published,
// last_error cleared.
func testNextRoundSucceeds(t *testing.T, s persistence.Store) {
	insert(t, s, joined(t, "ev-1", clockBase))
	pub := newPublisher(func(_ context.Context, _ persistence.Envelope, attempt int) error {
		if attempt == 1 {
			return errors.New("dial tcp: connection refused")
		}
		return nil
	})
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig()})

	eventually(t, "ev-1 published", published(t, s, "ev-1"))
	row := get(t, s, "ev-1")
	if row.RetryCount != 1 || row.LastError != "" {
		t.Fatalf("row = retry_count %d last_error %q, want 1 and empty", row.RetryCount, row.LastError)
	}
	if n := pub.attempts("ev-1"); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// worker cancel: after Stop no new batch is scanned; the publish in flight
// is bounded by publish_timeout, marked failed, and the rest of the batch
// is released untouched.
func testWorkerCancel(t *testing.T, s persistence.Store) {
	ids := pendingJoins(t, s, "ev", 3)
	cs := &countingStore{Store: s}
	entered := make(chan struct{}, 1)
	pub := newPublisher(func(ctx context.Context, _ persistence.Envelope, _ int) error {
		entered <- struct{}{}
		<-ctx.Done() // an IM call that hangs until its deadline
		return ctx.Err()
	})
	const publishTimeout = 400 * time.Millisecond
	r, err := Start(newSupervisor(t, newSystem(t), "workers"), Deps{Store: cs, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PublishTimeout = publishTimeout })})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(waitFor):
		t.Fatal("publish never started")
	}
	start := time.Now()
	if err := r.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > publishTimeout+3*time.Second {
		t.Fatalf("stop took %s, want about publish_timeout %s", took, publishTimeout)
	}
	claims := cs.claims.Load()

	first := get(t, s, ids[0])
	if first.Status != persistence.OutboxPending || first.RetryCount != 1 || !strings.Contains(first.LastError, "deadline exceeded") {
		t.Fatalf("in-flight row = %+v, want pending, retry_count 1, deadline error", first)
	}
	for _, id := range ids[1:] {
		row := get(t, s, id)
		if row.RetryCount != 0 || row.LockedBy != "" || row.Status != persistence.OutboxPending {
			t.Fatalf("unstarted row %s = %+v, want pending, untouched, lease released", id, row)
		}
	}
	if n := pub.total(); n != 1 {
		t.Fatalf("%d publishes, want only the in-flight one", n)
	}
	time.Sleep(5 * testConfig().PollInterval)
	if after := cs.claims.Load(); after != claims {
		t.Fatalf("%d claims after stop, want none", after-claims)
	}
}

// 非 IM 事件: RoomCreated, RoomHeatChanged and RoomRankChanged are not sent
// as messages but are marked published. RoomCreated still reaches the
// publisher: seed 003 makes its outbox row the idempotent compensation of
// the IM group creation (roomim turns it into create_group, not a message).
func testNonIMEventsMarkedPublished(t *testing.T, s persistence.Store) {
	evs := []room.Event{
		room.RoomCreated{OwnerUserID: "u1", Name: "r", MicSeats: 8, CreatedAtMs: clockBase},
		room.RoomHeatChanged{Delta: 10, Heat: 10},
		room.RoomRankChanged{Rank: 1, PrevRank: 2, Heat: 10},
	}
	var ids []string
	for i, ev := range evs {
		id := fmt.Sprintf("ev-%d", i)
		ids = append(ids, id)
		insert(t, s, envelope(t, id, ev, clockBase+int64(i)))
	}
	pub := newPublisher(nil)
	res, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if res.NoOp != 2 || res.Published != 1 {
		t.Fatalf("result %+v, want 2 no-op and RoomCreated handed to the publisher", res)
	}
	if n := pub.total(); n != 1 {
		t.Fatalf("publisher called %d times for non-IM events, want once (RoomCreated's group compensation)", n)
	}
	for _, id := range ids {
		if row := get(t, s, id); row.Status != persistence.OutboxPublished || row.LastError != "" {
			t.Fatalf("%s = %+v, want published", id, row)
		}
	}
}

func testBatchContinuesAfterFailure(t *testing.T, s persistence.Store) {
	ids := pendingJoins(t, s, "ev", 5)
	pub := newPublisher(func(_ context.Context, env persistence.Envelope, _ int) error {
		if env.EventID == ids[1] {
			return errors.New("boom")
		}
		return nil
	})
	res, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 4 || res.Failed != 1 || res.Claimed != 5 {
		t.Fatalf("result %+v, want 4 published 1 failed of 5", res)
	}
	for i, id := range ids {
		row := get(t, s, id)
		want := persistence.OutboxPublished
		if i == 1 {
			want = persistence.OutboxPending
		}
		if row.Status != want {
			t.Fatalf("%s status %s, want %s", id, row.Status, want)
		}
	}
}

// A corrupt envelope is parked with a reason and logged, and neither the
// batch nor the worker stops: rows after it and rows added later are
// published.
func testCorruptEnvelopeParked(t *testing.T, s persistence.Store) {
	bad := joined(t, "ev-bad", clockBase+1)
	bad.Payload = []byte(`{"user_id": 42}`) // a number where the type wants a string
	unknown := joined(t, "ev-unknown", clockBase+2)
	unknown.EventType = "RoomTeleported"
	insert(t, s, joined(t, "ev-0", clockBase), bad, unknown, joined(t, "ev-3", clockBase+3))
	// A publisher may find corruption the relay's own check cannot see.
	insert(t, s, joined(t, "ev-pubcorrupt", clockBase+4))

	logs := newLogSink()
	pub := newPublisher(func(_ context.Context, env persistence.Envelope, _ int) error {
		if env.EventID == "ev-pubcorrupt" {
			return fmt.Errorf("tencent im: build payload: %w", ErrCorruptEnvelope)
		}
		return nil
	})
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Logger: slogNew(logs), Config: testConfig()})

	eventually(t, "good rows published", func() bool {
		return published(t, s, "ev-0")() && published(t, s, "ev-3")()
	})
	for _, id := range []string{"ev-bad", "ev-unknown", "ev-pubcorrupt"} {
		// The log line follows the store write: wait for both.
		eventually(t, id+" parked and logged", func() bool {
			_, logged := logs.find("outbox event parked: it can never be published as it is; requeue or skip it with roomctl outbox",
				map[string]string{"event_id": id, "status": "parked"})
			return logged && get(t, s, id).Status == persistence.OutboxParked
		})
		row := get(t, s, id)
		if row.RetryCount != 1 || !strings.Contains(row.LastError, "corrupt envelope") {
			t.Fatalf("%s = %+v, want parked once with a corrupt-envelope reason", id, row)
		}
	}
	if pub.attempts("ev-bad") != 0 || pub.attempts("ev-unknown") != 0 {
		t.Fatal("the relay sent an envelope its own check found corrupt")
	}
	// The worker is still polling.
	insert(t, s, joined(t, "ev-later", clockBase+10))
	eventually(t, "a row added after the corrupt ones published", published(t, s, "ev-later"))
}

// Two relays (two nodes) on one store: every row is published exactly once.
func testTwoRelaysDisjoint(t *testing.T, s persistence.Store) {
	const n = 120
	ids := pendingJoins(t, s, "ev", n)
	pub := newPublisher(func(context.Context, persistence.Envelope, int) error {
		time.Sleep(500 * time.Microsecond) // keep both relays inside their batches
		return nil
	})
	cfg := testConfig(func(c *configs.OutboxWorkerConfig) { c.BatchSize = 7; c.PollInterval = 5 * time.Millisecond })
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "node-a", Config: cfg})
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "node-b", Config: cfg})

	eventually(t, "all rows published", func() bool {
		st, err := s.OutboxStats(context.Background())
		return err == nil && st.Pending == 0
	})
	counts := pub.snapshot()
	for _, id := range ids {
		if counts[id] != 1 {
			t.Fatalf("%s published %d times, want exactly 1", id, counts[id])
		}
	}
}

// Rows leased by a relay that died are published by another one once the
// lease has expired, and not before.
func testCrashedRelayLeaseExpires(t *testing.T, s persistence.Store) {
	ids := pendingJoins(t, s, "ev", 3)
	const lease = 700 * time.Millisecond
	claimed, err := s.ClaimPendingOutbox(context.Background(), "dead-node/1", time.Now().UnixMilli(), lease.Milliseconds(), 10)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim as the dead relay: %d rows, %v", len(claimed), err)
	}
	start := time.Now()
	pub := newPublisher(nil)
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n2", Config: testConfig()})

	eventually(t, "leased rows published after expiry", func() bool {
		for _, id := range ids {
			if !published(t, s, id)() {
				return false
			}
		}
		return true
	})
	if took := time.Since(start); took < lease-100*time.Millisecond {
		t.Fatalf("rows published after %s, before the dead relay's lease (%s) ran out", took, lease)
	}
}

// A panic in a publish crashes the relay; the supervisor restarts it. The
// panicking row stays pending (leased until it expires, so it cannot
// crash-loop the relay), the rows behind it are released and published at
// once, and the panicking row is published after its lease.
func testPanicRestarts(t *testing.T, s persistence.Store) {
	ids := pendingJoins(t, s, "ev", 3)
	var panicked atomic.Bool
	pub := newPublisher(func(_ context.Context, env persistence.Envelope, _ int) error {
		if env.EventID == ids[0] && panicked.CompareAndSwap(false, true) {
			panic("publisher bug: nil map")
		}
		return nil
	})
	sys := newSystem(t)
	logs := newLogSink()
	unsubscribe := superviseLog(sys, logs)
	defer unsubscribe()
	const lease = 1500 * time.Millisecond
	startRelay(t, sys, Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.LeaseTTL = lease })})

	eventually(t, "rows behind the panic published", func() bool {
		return published(t, s, ids[1])() && published(t, s, ids[2])()
	})
	row := get(t, s, ids[0])
	if row.Status != persistence.OutboxPending || row.RetryCount != 0 || row.LockedBy == "" {
		t.Fatalf("panicking row = %+v, want pending, retry_count 0, still leased", row)
	}
	rec, ok := logs.find("actor failed", map[string]string{"directive": "RestartDirective"})
	if !ok {
		t.Fatalf("no supervisor event logged; logs: %+v", logs.all())
	}
	if !strings.Contains(rec.Attrs["reason"], "publisher bug: nil map") || !strings.Contains(rec.Attrs["stack"], "PublishRoomEvent") {
		t.Fatalf("supervisor log %+v lacks the panic value or its stack", rec.Attrs)
	}
	eventually(t, "panicking row published after its lease", published(t, s, ids[0]))
	if n := pub.attempts(ids[0]); n != 2 {
		t.Fatalf("%d attempts of the panicking row, want 2", n)
	}
}

// Restarts must not add tick chains: after five crash-restarts the relay
// still runs about one batch per poll_interval. The crashes come from
// RunNow batches, i.e. while a tick timer is pending: that is the case in
// which a timer not cancelled on Restarting (or a stale tick answered by the
// new incarnation) would start a second chain per restart.
func testTicksDoNotMultiply(t *testing.T, s persistence.Store) {
	const crashes = 5
	pub := newPublisher(func(_ context.Context, _ persistence.Envelope, attempt int) error {
		if attempt == 1 {
			panic("crash")
		}
		return nil
	})
	cs := &countingStore{Store: s}
	const poll = 200 * time.Millisecond
	sys := newSystem(t)
	r := startRelay(t, sys, Deps{Store: cs, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) {
			c.PollInterval, c.BatchSize, c.LeaseTTL = poll, 10, 600*time.Millisecond
		})})
	for i := range crashes {
		id := fmt.Sprintf("crash-%d", i)
		insert(t, s, joined(t, id, clockBase+int64(i)))
		r.Kick()
		eventually(t, id+" crashed the relay", func() bool { return pub.attempts(id) >= 1 })
	}

	const window = 1500 * time.Millisecond
	before := cs.claims.Load()
	time.Sleep(window)
	batches := cs.claims.Load() - before
	if limit := int64(window/poll) + 3; batches > limit || batches < 1 {
		t.Fatalf("%d batches in %s at poll %s after %d restarts, want 1..%d", batches, window, poll, crashes, limit)
	}
}

// exponential: a failed row waits min(max_backoff, poll·2^n)·jitter after
// its failure; a row whose wait has not ended is not even claimed, so it
// does not block other rooms' rows; an operator's requeue makes it due at
// once.
func testExponentialInStore(t *testing.T, s persistence.Store) {
	clock := newClock()
	insert(t, s, joined(t, "ev-old1", clockBase), joined(t, "ev-old2", clockBase+1))
	fail := atomic.Bool{}
	fail.Store(true)
	pub := newPublisher(func(context.Context, persistence.Envelope, int) error {
		if fail.Load() {
			return errors.New("im down")
		}
		return nil
	})
	cfg := testConfig(func(c *configs.OutboxWorkerConfig) {
		c.RetryStrategy = configs.RetryExponential
		c.PollInterval, c.MaxBackoff, c.BatchSize = time.Second, 10*time.Second, 2
	})
	deps := Deps{Store: s, Publisher: pub, NodeID: "n1", Config: cfg, Clock: clock.Now}
	run := func() Result {
		t.Helper()
		res, err := ProcessBatch(context.Background(), deps)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(); res.Failed != 2 {
		t.Fatalf("first batch %+v, want both failed", res)
	}
	fail.Store(false)
	// Both rows wait at least 0.5·2s; a new row comes in behind them.
	insert(t, s, joined(t, "ev-new", clockBase+2))
	clock.Add(100 * time.Millisecond)
	res := run()
	if res.Claimed != 1 || res.Published != 1 || pub.attempts("ev-new") != 1 {
		t.Fatalf("batch during backoff %+v, want only ev-new claimed and published", res)
	}
	for _, id := range []string{"ev-old1", "ev-old2"} {
		row := get(t, s, id)
		if row.RetryCount != 1 || row.LockedBy != "" || pub.attempts(id) != 1 {
			t.Fatalf("%s = %+v after a batch during its backoff, want untouched", id, row)
		}
		if wait := time.Duration(row.NextRetryAtMs-row.UpdatedAtMs) * time.Millisecond; (wait - backoff(cfg, id, 1)).Abs() >= time.Millisecond {
			t.Fatalf("%s waits %s, want backoff(1) = %s", id, wait, backoff(cfg, id, 1))
		}
	}
	// An operator's requeue makes a row due at once.
	if err := s.RequeueOutbox(context.Background(), "ev-old2", clock.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if res := run(); res.Published != 1 || !published(t, s, "ev-old2")() {
		t.Fatalf("batch after requeue %+v, want ev-old2 published", res)
	}
	// After the longest possible wait for n=1 (2s), the other goes too.
	clock.Add(2 * time.Second)
	if res := run(); res.Published != 1 || !published(t, s, "ev-old1")() {
		t.Fatalf("batch after backoff %+v, want ev-old1 published", res)
	}
}

// A poison pill waits for the publish in flight (it finishes within
// publish_timeout and is marked published), and nothing after it starts.
func testPoisonWaitsForInFlight(t *testing.T, s persistence.Store) {
	ids := pendingJoins(t, s, "ev", 2)
	entered := make(chan struct{}, 1)
	const slow = 300 * time.Millisecond
	pub := newPublisher(func(ctx context.Context, _ persistence.Envelope, _ int) error {
		entered <- struct{}{}
		select {
		case <-time.After(slow):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	r, err := Start(newSupervisor(t, newSystem(t), "workers"), Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PublishTimeout = 5 * time.Second; c.LeaseTTL = 10 * time.Second })})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	start := time.Now()
	if err := r.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < slow/2 {
		t.Fatalf("stop returned after %s, before the in-flight publish (%s) could finish", took, slow)
	}
	if row := get(t, s, ids[0]); row.Status != persistence.OutboxPublished {
		t.Fatalf("in-flight row = %+v, want published", row)
	}
	if row := get(t, s, ids[1]); row.Status != persistence.OutboxPending || row.LockedBy != "" || pub.attempts(ids[1]) != 0 {
		t.Fatalf("second row = %+v, want pending, not attempted, lease released", row)
	}
}

// RunNow runs a batch at once and returns its result; a row waiting for
// its retry is not claimed until an operator's requeue makes it due.
func testRunNowForcesRetry(t *testing.T, s persistence.Store) {
	insert(t, s, joined(t, "ev-1", clockBase))
	now := time.Now().UnixMilli()
	if err := s.MarkOutboxFailed(context.Background(), "ev-1", "earlier failure", now, now+time.Hour.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(nil)
	r := startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PollInterval = time.Hour })})
	res, err := r.RunNow(waitFor)
	if err != nil || res.Err != nil || res.Result.Claimed != 0 {
		t.Fatalf("RunNow during the wait = %+v %v, want nothing claimable", res, err)
	}
	if err := s.RequeueOutbox(context.Background(), "ev-1", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	res, err = r.RunNow(waitFor)
	if err != nil || res.Err != nil || res.Result.Published != 1 {
		t.Fatalf("RunNow after requeue = %+v %v, want ev-1 published", res, err)
	}
	if !published(t, s, "ev-1")() || pub.attempts("ev-1") != 1 {
		t.Fatal("ev-1 not published exactly once after requeue")
	}
}

// A full, clean batch is followed at once by the next: a backlog of 35 rows
// at batch_size 10 drains with poll_interval an hour. A batch with a
// failure waits for the poll (no tight retry loop during an IM outage).
func testBacklogDrains(t *testing.T, s persistence.Store) {
	pendingJoins(t, s, "ev", 35)
	pub := newPublisher(nil)
	r := startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PollInterval, c.BatchSize = time.Hour, 10 })})
	eventually(t, "backlog drained", func() bool {
		st, err := s.OutboxStats(context.Background())
		return err == nil && st.Pending == 0
	})
	if n := pub.total(); n != 35 {
		t.Fatalf("%d publishes, want 35", n)
	}
	if err := r.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	failing := &countingStore{Store: s}
	pendingJoins(t, s, "down", 20)
	down := newPublisher(func(context.Context, persistence.Envelope, int) error { return errors.New("im down") })
	startRelay(t, newSystem(t), Deps{Store: failing, Publisher: down, NodeID: "n2",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PollInterval, c.BatchSize = time.Hour, 10 })})
	eventually(t, "first batch", func() bool { return down.total() == 10 })
	time.Sleep(300 * time.Millisecond)
	if c, n := failing.claims.Load(), down.total(); c != 1 || n != 10 {
		t.Fatalf("%d batches, %d publishes while IM is down, want 1 and 10 until the next poll", c, n)
	}
}

// A publisher that panics on every call for 200 calls, then recovers: the
// worker supervisor restarts the relay every time (with its backoff), the
// restarts are counted (Health and roomcell_worker_restarts_total), the
// relay is reported down while it waits for a restart (roomcell_workers_down
// counts it), and every row is published afterwards.
func TestRelaySurvivesRepeatedPanics(t *testing.T) {
	s := newMemDB(t)
	ids := pendingJoins(t, s, "ev", 40)
	const panics = 200
	var calls atomic.Int64
	pub := newPublisher(func(context.Context, persistence.Envelope, int) error {
		if calls.Add(1) <= panics {
			panic("publisher bug")
		}
		return nil
	})
	sup, reg := supervisetest.NewSupervisor(t, newSystem(t))
	stopWatch := supervisetest.WatchDown(sup.Health(), WorkerName)
	r, err := Start(sup, Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) {
		c.PublishTimeout, c.LeaseTTL = 100*time.Millisecond, 400*time.Millisecond
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(5 * time.Second) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := s.OutboxStats(context.Background())
		if err == nil && st.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained after the panics: %+v %v (calls %d, restarts %d)", st, err, calls.Load(), sup.Health().Restarts(WorkerName))
		}
		time.Sleep(20 * time.Millisecond)
	}
	sawDown := stopWatch()
	for _, id := range ids {
		if !published(t, s, id)() {
			t.Fatalf("%s not published", id)
		}
	}
	supervisetest.CheckRecovered(t, sup, reg, r, WorkerName, panics, sawDown)
}

// 100 corrupt rows ahead of good ones with batch_size 10. Every
// corrupt row is parked on its first attempt, so the good rows are
// published within a few batches instead of waiting behind them forever;
// a parked row can be requeued (and is parked again while still corrupt)
// or skipped with who and why.
func TestCorruptRowsDoNotStallBatches(t *testing.T) {
	for _, sc := range []storeCase{{"memdb", newMemDB}, {"mariadb", newMariaDB}} {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.new(t)
			var bad []string
			for i := range 100 {
				env := joined(t, fmt.Sprintf("bad-%03d", i), clockBase+int64(i))
				env.Payload = []byte(`{"user_id": 42}`)
				insert(t, s, env)
				bad = append(bad, env.EventID)
			}
			good := make([]string, 5)
			for i := range good {
				good[i] = fmt.Sprintf("good-%d", i)
				insert(t, s, joined(t, good[i], clockBase+1000+int64(i)))
			}
			pub := newPublisher(nil)
			deps := Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.BatchSize = 10 })}
			batches := 0
			for ; batches < 20; batches++ {
				if _, err := ProcessBatch(context.Background(), deps); err != nil {
					t.Fatal(err)
				}
				if st, err := s.OutboxStats(context.Background()); err == nil && st.Pending == 0 {
					break
				}
			}
			// 105 rows at 10 per batch: 11 batches, each row attempted once.
			if batches > 11 {
				t.Fatalf("%d batches to drain 100 corrupt + 5 good rows at batch_size 10", batches+1)
			}
			for _, id := range good {
				if !published(t, s, id)() || pub.attempts(id) != 1 {
					t.Fatalf("%s not published exactly once", id)
				}
			}
			st, err := s.OutboxStats(context.Background())
			if err != nil || st.Parked != 100 || st.Pending != 0 {
				t.Fatalf("stats %+v %v, want 100 parked, none pending", st, err)
			}
			for _, id := range bad {
				if row := get(t, s, id); row.Status != persistence.OutboxParked || row.RetryCount != 1 || pub.attempts(id) != 0 {
					t.Fatalf("%s = %+v, want parked once, never sent", id, row)
				}
			}
			now := time.Now().UnixMilli()
			if err := s.RequeueOutbox(context.Background(), bad[0], now); err != nil {
				t.Fatal(err)
			}
			if err := s.SkipOutbox(context.Background(), bad[1], "ops:alice", "payload lost upstream", now); err != nil {
				t.Fatal(err)
			}
			if _, err := ProcessBatch(context.Background(), deps); err != nil {
				t.Fatal(err)
			}
			if row := get(t, s, bad[0]); row.Status != persistence.OutboxParked || row.RetryCount != 2 {
				t.Fatalf("requeued corrupt row = %+v, want tried again and parked again", row)
			}
			if row := get(t, s, bad[1]); row.Status != persistence.OutboxSkipped || row.ResolvedBy != "ops:alice" ||
				row.Resolution != "payload lost upstream" || row.ResolvedAtMs != now {
				t.Fatalf("skipped row = %+v, want who/when/why recorded", row)
			}
		})
	}
}
