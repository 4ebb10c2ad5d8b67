//go:build !race

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster/clustertest"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
)

// Watch under failure: three roomcell processes (each in a network
// namespace of its own), 50 rooms under JoinRoom load (about 3 a second
// each), 200 WatchRoom streams from after_room_seq 0 (4 a room, spread
// over the nodes). The node owning the most rooms is SIGKILLed (and
// started again), then the busiest owner is frozen (SIGSTOP), then the
// busiest owner is cut off by the partition harness. Each watcher, whenever its stream ends with a
// retryable status (or its connection fails), resumes on another node
// with after_room_seq = the last room_seq it received. Asserted:
//   - a stream that ends with a resume seq names exactly the last room_seq
//     its client received;
//   - every watcher's messages, over all its streams, are the room's log:
//     the same room_seqs (every seq that has events, strictly increasing,
//     none twice, none missing) with the same event ids in the same order,
//     where the log is ListRoomEvents from the owner at the end and is
//     itself checked against the store's command log;
//   - every acknowledged command is in the log once, every room's log is
//     gapless (clustertest.VerifyLog); no command failed for good;
//   - each failure ended some streams, which resumed.
//
// Logged: per failure, how long after it the streams ended (detection),
// how long from an end until the resumed stream delivered its first
// message (resume; it includes waiting for the room's next event when
// nothing was missed), by cause.
//
// The short form freezes and cuts for 5 s each (about a minute in all);
// ROOMCELL_WATCH_CHAOS_LONG=1 does 15 s each, as the issue asks.
func TestMultiMemberWatchResumesGaplessUnderKillPauseAndPartition(t *testing.T) {
	freeze, cut := 5*time.Second, 5*time.Second
	if chaosLong("ROOMCELL_WATCH_CHAOS_LONG") {
		freeze, cut = 15*time.Second, 15*time.Second
	}
	const nRooms, nWatchers = 50, 200
	start := time.Now()
	c := clustertest.New(t, clustertest.Options{Nodes: 3, BinDir: clusterBinDir(), Netns: true, Edit: func(_ int, nc *clustertest.NodeConfig) {
		// The load's users never heartbeat; presence would take them out
		// after a minute, which is fine for the log but not needed.
		nc.Presence = map[string]any{"stale_after": "10m"}
	}})
	rooms := clustertest.RoomIDs(nRooms)
	clustertest.CreateRooms(t, c.Nodes, rooms, 8)
	clients := watchClients(t, c)

	ctx, cancel := context.WithCancel(context.Background())
	var phase atomic.Value
	phase.Store("steady")
	ws := make([]*roomWatcher, nWatchers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &roomWatcher{room: rooms[i%nRooms], node: i % len(c.Nodes), nodes: c.Nodes, phase: &phase}
		wg.Add(1)
		go func() { defer wg.Done(); ws[i].run(ctx, clients) }()
	}
	stopWatchers := sync.OnceFunc(func() { cancel(); wg.Wait() })
	defer stopWatchers() // before the cluster's cleanup kills the nodes

	load := &joinLoad{nodes: c.Nodes, rooms: rooms, acked: map[string]clustertest.Ack{}, stop: make(chan struct{})}
	load.start(t)
	stopLoad := sync.OnceFunc(load.close)
	defer stopLoad()
	waitUntil(t, 30*time.Second, "every watcher has its room's first events", func() bool {
		for _, w := range ws {
			if w.lastSeq() < 2 {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)

	type failure struct {
		name, victim  string
		at, recoverAt time.Time
	}
	var failures []*failure
	var owned map[string]bool
	begin := func(name string, victim *clustertest.Node) *failure {
		f := &failure{name: name, victim: victim.ID, at: time.Now()}
		phase.Store(name)
		failures = append(failures, f)
		return f
	}
	// recover logs, before the failure ends, how long the watchers on the
	// other nodes have gone without a message: those of the victim's
	// rooms (their rooms moved; their feeds were subscribed at the victim)
	// and the others (the load's pace).
	recover := func(f *failure) {
		f.recoverAt = time.Now()
		t.Logf("%s: at its end, watchers on the other nodes went without a message for: victim's rooms %s; other rooms %s",
			f.name, silence(ws, f.victim, owned, true), silence(ws, f.victim, owned, false))
	}

	var victim *clustertest.Node
	victim, owned = busiestOwner(t, c, rooms)
	f := begin("SIGKILL", victim)
	victim.Kill()
	time.Sleep(4 * time.Second)
	recover(f)
	victim.Start(t)
	victim.WaitReady(t, 60*time.Second)
	time.Sleep(3 * time.Second)

	victim, owned = busiestOwner(t, c, rooms)
	f = begin(fmt.Sprintf("SIGSTOP %s", freeze), victim)
	victim.Pause()
	time.Sleep(freeze)
	recover(f)
	victim.Resume()
	time.Sleep(5 * time.Second)

	victim, owned = busiestOwner(t, c, rooms)
	f = begin(fmt.Sprintf("partition %s", cut), victim)
	victim.Partition(t)
	time.Sleep(cut)
	recover(f)
	victim.Heal(t)
	time.Sleep(5 * time.Second)
	phase.Store("after")

	stopLoad()
	load.mu.Lock()
	for _, f := range load.failed {
		t.Error(f)
	}
	acked := maps.Clone(load.acked)
	load.mu.Unlock()
	c.VerifyLog(t, acked)

	logs := readRoomLogs(t, c, rooms)
	checkLogsAgainstStore(t, c, logs)
	waitUntil(t, 60*time.Second, "every watcher reaches its room's last event", func() bool {
		for _, w := range ws {
			l := logs[w.room]
			if len(l) > 0 && w.lastSeq() < l[len(l)-1].seq {
				return false
			}
		}
		return true
	})
	stopWatchers()

	var streams, messages int
	for i, w := range ws {
		w.mu.Lock()
		for _, f := range w.faults {
			t.Errorf("watcher %d (%s): %s", i, w.room, f)
		}
		if err := sameLog(w.got, logs[w.room]); err != nil {
			t.Errorf("watcher %d (%s) received something else than the room's log: %v", i, w.room, err)
		}
		streams += len(w.resumes) + 1
		messages += len(w.got)
		w.mu.Unlock()
	}

	// The figures, by failure.
	for fi, f := range failures {
		until := time.Now()
		if fi+1 < len(failures) {
			until = failures[fi+1].at
		}
		var detect, during, resume, outage []time.Duration
		causes := map[string]int{}
		resumeBy := map[string][]time.Duration{}
		for _, w := range ws {
			for _, r := range w.resumes {
				if r.endedAt.Before(f.at) || !r.endedAt.Before(until) {
					continue
				}
				where := "elsewhere"
				if r.node == f.victim {
					where = "on the victim"
				}
				causes[r.cause+" "+where]++
				detect = append(detect, r.endedAt.Sub(f.at))
				if r.endedAt.Before(f.recoverAt) {
					during = append(during, r.endedAt.Sub(f.at))
				}
				if !r.resumedAt.IsZero() {
					resume = append(resume, r.resumedAt.Sub(r.endedAt))
					outage = append(outage, r.resumedAt.Sub(f.at))
					resumeBy[r.cause] = append(resumeBy[r.cause], r.resumedAt.Sub(r.endedAt))
				}
			}
		}
		if len(detect) == 0 {
			t.Errorf("%s of %s ended no watch stream: the failure tested nothing", f.name, f.victim)
		}
		t.Logf("%s of %s: %d stream ends (%s)", f.name, f.victim, len(detect), counts(causes))
		t.Logf("  failure → stream end: %s; of them before the failure ended: %s", durations(detect), durations(during))
		t.Logf("  stream end → first message on the resumed stream: %s", durations(resume))
		for _, cause := range slices.Sorted(maps.Keys(resumeBy)) {
			t.Logf("    %s: %s", cause, durations(resumeBy[cause]))
		}
		t.Logf("  failure → first message on the resumed stream: %s", durations(outage))
	}
	t.Logf("%d watchers, %d streams, %d messages checked against the log; load: %d joins acknowledged (%d attempts retried); %s in all",
		len(ws), streams, messages, len(acked), load.retried.Load(), time.Since(start).Round(time.Second))
}

// joinLoad writes JoinRoom commands (a new user each): one writer per
// room, one join every 200–400 ms, so a room whose owner is fine keeps
// getting events while another room waits out its failover (a few
// closed-loop writers over all rooms would soon all wait on the failed
// node's rooms, and no room would get events during the failure). A
// writer steers as a client would: an attempt waits 2 s at most, and a
// node that failed one is avoided for 3 s. A command is retried with its
// command_id until it is acknowledged or 90 s pass.
type joinLoad struct {
	nodes   []*clustertest.Node
	rooms   []string
	stop    chan struct{}
	wg      sync.WaitGroup
	retried atomic.Int64

	mu      sync.Mutex
	badTill map[string]time.Time
	acked   map[string]clustertest.Ack
	failed  []string
}

func (l *joinLoad) start(t *testing.T) {
	l.badTill = map[string]time.Time{}
	for _, r := range l.rooms {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				l.join(t, fmt.Sprintf("%s-%d", r, i), r)
				select {
				case <-l.stop:
					return
				case <-time.After(200*time.Millisecond + rand.N(200*time.Millisecond)):
				}
			}
		}()
	}
}

func (l *joinLoad) close() { close(l.stop); l.wg.Wait() }

// pick is a random node not marked bad (any node when all are).
func (l *joinLoad) pick() *clustertest.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	var good []*clustertest.Node
	for _, n := range l.nodes {
		if time.Now().After(l.badTill[n.ID]) {
			good = append(good, n)
		}
	}
	if len(good) == 0 {
		good = l.nodes
	}
	return good[rand.IntN(len(good))]
}

func (l *joinLoad) join(t *testing.T, id, roomID string) {
	req := &v1.JoinRoomRequest{CommandId: id, AppCode: clustertest.App, RoomId: roomID, UserId: "u-" + id}
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := l.pick()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rep, err := n.Rooms(t).JoinRoom(ctx, req)
		cancel()
		l.mu.Lock()
		switch {
		case err == nil:
			l.acked[id] = clustertest.Ack{Room: roomID, Seq: rep.GetRoomSeq(), Duplicate: rep.GetDuplicate()}
		case !clustertest.Retryable(err) || time.Now().After(deadline):
			l.failed = append(l.failed, fmt.Sprintf("join %s via %s: %v", id, n.ID, err))
		default:
			l.badTill[n.ID] = time.Now().Add(3 * time.Second)
		}
		l.mu.Unlock()
		if err == nil || !clustertest.Retryable(err) || time.Now().After(deadline) {
			return
		}
		l.retried.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
}

// silence is how long the watchers whose stream is on another node than
// victim, of the victim's rooms (ofVictim) or of the others, have
// received nothing, now.
func silence(ws []*roomWatcher, victim string, owned map[string]bool, ofVictim bool) string {
	var ds []time.Duration
	now := time.Now()
	for _, w := range ws {
		w.mu.Lock()
		if w.nodes[w.node].ID != victim && owned[w.room] == ofVictim {
			ds = append(ds, now.Sub(w.lastAt))
		}
		w.mu.Unlock()
	}
	return durations(ds)
}

// watchClients dials every node with client keepalives, as a mobile
// client would: a frozen node's streams then fail within about 12 s
// instead of hanging until it thaws. The server allows a ping every 10 s.
func watchClients(t *testing.T, c *clustertest.Cluster) []v1.RoomServiceClient {
	out := make([]v1.RoomServiceClient, len(c.Nodes))
	for i, n := range c.Nodes {
		conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		out[i] = v1.NewRoomServiceClient(conn)
	}
	return out
}

// logEntry is one room_seq of a room's events.
type logEntry struct {
	seq int64
	ids []string
}

// resume is one end of a watcher's stream and what followed.
type resume struct {
	phase     string
	node      string // the node whose stream ended
	cause     string // status code and cause, or the transport error's code
	endedAt   time.Time
	resumedAt time.Time // first message on a later stream; zero: none came
	attempts  int       // streams opened until one delivered
}

// roomWatcher follows one room for the whole test, resuming after every
// end from the last room_seq it received.
type roomWatcher struct {
	room  string
	node  int // the node of the current stream
	nodes []*clustertest.Node
	phase *atomic.Value

	mu      sync.Mutex
	lastAt  time.Time // when the last message came
	got     []logEntry
	resumes []*resume
	faults  []string
}

func (w *roomWatcher) lastSeq() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return 0
	}
	return w.got[len(w.got)-1].seq
}

func (w *roomWatcher) fault(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.faults) < 5 {
		w.faults = append(w.faults, fmt.Sprintf(format, args...))
	}
}

func (w *roomWatcher) run(ctx context.Context, clients []v1.RoomServiceClient) {
	backoff := 100 * time.Millisecond
	var pending *resume
	for ctx.Err() == nil {
		after := w.lastSeq()
		err := w.stream(ctx, clients[w.node], after, &pending)
		if ctx.Err() != nil {
			return
		}
		if err == nil || errors.Is(err, io.EOF) {
			w.fault("stream on %s ended without a status", w.nodes[w.node].ID)
			err = status.Error(codes.Unavailable, "ended without a status")
		}
		if seq, ok := grpcapi.ResumeAfterSeq(err); ok && seq != w.lastSeq() {
			w.fault("stream on %s ended with resume_after_seq %d; the last room_seq received was %d", w.nodes[w.node].ID, seq, w.lastSeq())
		}
		if !watchRetryable(err) {
			w.fault("stream on %s ended with a status that is not retryable: %v", w.nodes[w.node].ID, err)
			return
		}
		if pending == nil {
			pending = &resume{phase: w.phase.Load().(string), node: w.nodes[w.node].ID, cause: endCause(err), endedAt: time.Now()}
			w.mu.Lock()
			w.resumes = append(w.resumes, pending)
			w.mu.Unlock()
			backoff = 100 * time.Millisecond
		}
		pending.attempts++
		// Resume on any node but the one that just failed us.
		w.mu.Lock()
		w.node = (w.node + 1 + rand.IntN(len(clients)-1)) % len(clients)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff/2 + rand.N(backoff/2)):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// stream runs one WatchRoom call until it ends; *pending is the end being
// resumed from, completed by the first message.
func (w *roomWatcher) stream(ctx context.Context, rc v1.RoomServiceClient, after int64, pending **resume) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := rc.WatchRoom(sctx, &v1.WatchRoomRequest{AppCode: clustertest.App, RoomId: w.room, AfterRoomSeq: after})
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		w.mu.Lock()
		last := int64(0)
		if len(w.got) > 0 {
			last = w.got[len(w.got)-1].seq
		}
		if m.GetRoomSeq() <= last {
			w.mu.Unlock()
			w.fault("room_seq %d after %d", m.GetRoomSeq(), last)
			continue
		}
		ids := make([]string, len(m.GetEvents()))
		for i, e := range m.GetEvents() {
			ids[i] = e.GetEventId()
			if e.GetRoomSeq() != m.GetRoomSeq() {
				ids[i] += fmt.Sprintf("(room_seq %d)", e.GetRoomSeq())
			}
		}
		w.got = append(w.got, logEntry{seq: m.GetRoomSeq(), ids: ids})
		w.lastAt = now
		if *pending != nil {
			(*pending).resumedAt = now
			*pending = nil
		}
		w.mu.Unlock()
	}
}

// watchRetryable: the statuses after which a client watches again from
// its last seq (the room moved or its owner went silent, the node is
// draining or down, the reader was cut, the node serves its maximum).
func watchRetryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Canceled:
		return true
	}
	return false
}

// endCause names an end: the code, and the server's cause when it gave
// a resume seq (a transport failure has none).
func endCause(err error) string {
	st, _ := status.FromError(err)
	cause := st.Code().String()
	if _, ok := grpcapi.ResumeAfterSeq(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetMetadata()["cause"] != "" {
				return cause + "/" + info.GetMetadata()["cause"]
			}
		}
		return cause + "/resume"
	}
	return cause + "/transport"
}

// busiestOwner is the node that owns the most of rooms right now.
func busiestOwner(t *testing.T, c *clustertest.Cluster, rooms []string) (*clustertest.Node, map[string]bool) {
	t.Helper()
	byAddr := map[string]int{}
	ownerOf := map[string]string{}
	for _, r := range rooms {
		var rep *v1.WhereIsRoomReply
		err := retrying(10*time.Second, func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			rep, err = c.Nodes[i%len(c.Nodes)].Admin(t).WhereIsRoom(ctx, &v1.WhereIsRoomRequest{AppCode: clustertest.App, RoomId: r})
			return err
		})
		if err != nil {
			t.Fatalf("where is %s: %v", r, err)
		}
		byAddr[rep.GetOwnerAddress()]++
		ownerOf[r] = rep.GetOwnerAddress()
	}
	var best *clustertest.Node
	for _, n := range c.Nodes {
		if best == nil || byAddr[n.ClusterAddr] > byAddr[best.ClusterAddr] {
			best = n
		}
	}
	if byAddr[best.ClusterAddr] == 0 {
		t.Fatalf("no node owns a room: %v", byAddr)
	}
	owned := map[string]bool{}
	for r, a := range ownerOf {
		owned[r] = a == best.ClusterAddr
	}
	return best, owned
}

// readRoomLogs reads every room's events with ListRoomEvents (answered by
// the room's owner) through any node, to the head.
func readRoomLogs(t *testing.T, c *clustertest.Cluster, rooms []string) map[string][]logEntry {
	t.Helper()
	out := map[string][]logEntry{}
	for _, r := range rooms {
		var entries []logEntry
		after, head := int64(0), int64(-1)
		for after != head {
			var rep *v1.ListRoomEventsReply
			err := retrying(60*time.Second, func(i int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				rep, err = c.Nodes[i%len(c.Nodes)].Rooms(t).ListRoomEvents(ctx, &v1.ListRoomEventsRequest{
					AppCode: clustertest.App, RoomId: r, AfterRoomSeq: after, Limit: 1000})
				return err
			})
			if err != nil {
				t.Fatalf("list events of %s after %d: %v", r, after, err)
			}
			for _, e := range rep.GetEvents() {
				if n := len(entries); n > 0 && entries[n-1].seq == e.GetRoomSeq() {
					entries[n-1].ids = append(entries[n-1].ids, e.GetEventId())
				} else {
					entries = append(entries, logEntry{seq: e.GetRoomSeq(), ids: []string{e.GetEventId()}})
				}
			}
			if rep.GetNextAfterSeq() <= after && rep.GetNextAfterSeq() != rep.GetHeadSeq() {
				t.Fatalf("list events of %s after %d made no progress: %v", r, after, rep)
			}
			after, head = rep.GetNextAfterSeq(), rep.GetHeadSeq()
		}
		out[r] = entries
	}
	return out
}

// checkLogsAgainstStore compares the logs ListRoomEvents gave with the
// store's command log: the same room_seqs with events, the same ids.
func checkLogsAgainstStore(t *testing.T, c *clustertest.Cluster, logs map[string][]logEntry) {
	t.Helper()
	ctx := context.Background()
	for r, want := range logs {
		recs, err := c.RoomStore(t, r).LoadCommands(ctx, persistence.RoomKey{AppCode: clustertest.App, RoomID: r}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var fromStore []logEntry
		for i, rec := range recs {
			if rec.Seq != int64(i+1) {
				t.Fatalf("%s: the store's log has seq %d at position %d", r, rec.Seq, i)
			}
			if len(rec.Events) == 0 {
				continue
			}
			e := logEntry{seq: rec.Seq}
			for _, ev := range rec.Events {
				e.ids = append(e.ids, ev.EventID)
			}
			fromStore = append(fromStore, e)
		}
		if err := sameLog(want, fromStore); err != nil {
			t.Fatalf("%s: ListRoomEvents and the store's command log differ: %v", r, err)
		}
	}
}

// sameLog reports the first difference between two logs.
func sameLog(got, want []logEntry) error {
	for i := range min(len(got), len(want)) {
		if got[i].seq != want[i].seq {
			return fmt.Errorf("entry %d is room_seq %d, the log's is %d (previous: %d)", i, got[i].seq, want[i].seq, prevSeq(want, i))
		}
		if !slices.Equal(got[i].ids, want[i].ids) {
			return fmt.Errorf("room_seq %d has events %v, the log's are %v", got[i].seq, got[i].ids, want[i].ids)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d room_seqs, the log has %d (last %d vs %d)", len(got), len(want), prevSeq(got, len(got)), prevSeq(want, len(want)))
	}
	return nil
}

func prevSeq(l []logEntry, i int) int64 {
	if i == 0 || i > len(l) {
		return 0
	}
	return l[i-1].seq
}

// retrying calls do (with the attempt number) until it succeeds, fails
// with an error that is not retryable, or d has passed.
func retrying(d time.Duration, do func(attempt int) error) error {
	deadline := time.Now().Add(d)
	for i := 0; ; i++ {
		err := do(i)
		if err == nil || !clustertest.Retryable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
