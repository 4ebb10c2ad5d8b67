package roomfeed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/errclass"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// eventsNode is a one-member cluster over a memdb store.
type eventsNode struct {
	store  *memdb.Store
	member *cluster.Member
	client Client
}

func startEventsNode(t testing.TB, pub delivery.Publisher, snapshotEvery int) *eventsNode {
	t.Helper()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	if snapshotEvery > 0 {
		cfg.Room.SnapshotEvery = snapshotEvery
	}
	store := memdb.New()
	deps := roomgrain.Deps{Store: store, Publisher: pub, Gifts: roomgrain.FreeGifts(3), Config: cfg.Room,
		Observers: []roomgrain.NewObserver{New(Config{StoreTimeout: cfg.Room.StoreTimeout}).Observe()}}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(deps))},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(false) })
	return &eventsNode{store: store, member: m, client: Client{&roomgrain.Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}}}
}

func (n *eventsNode) do(t testing.TB, rc *v1.RoomCommand) *v1.CommandReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.client.Execute(ctx, rc)
	if err != nil {
		t.Fatalf("command %v: %v", rc, err)
	}
	return r
}

func createCmd(roomID, id string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: "owner", Name: "n"}}}
}

func joinCmd(roomID, id, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func leaveCmd(roomID, id, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user}}}
}

// logEventIDs is every event of the room's stored log after after, in
// order, as the store has it.
func logEventIDs(t testing.TB, s persistence.RoomStore, roomID string, after int64) []string {
	t.Helper()
	recs, err := s.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: roomID}, after)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		for _, e := range r.Events {
			ids = append(ids, e.EventID)
		}
	}
	return ids
}

func TestListEventsPagesTheLogInRoomSeqOrder(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	n.do(t, createCmd("r1", "c0"))
	for i := range 40 {
		if i%2 == 0 {
			n.do(t, joinCmd("r1", fmt.Sprint("c", i+1), "bob"))
		} else {
			n.do(t, leaveCmd("r1", fmt.Sprint("c", i+1), "bob"))
		}
	}
	ctx := context.Background()
	var got []string
	after, calls := int64(0), 0
	for {
		r, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if r.HeadSeq != 41 {
			t.Fatalf("head %d, want 41", r.HeadSeq)
		}
		if len(r.Events) > 7 {
			t.Fatalf("%d events for limit 7", len(r.Events))
		}
		prev := after
		for _, e := range r.Events {
			if e.RoomSeq <= prev-1 || e.RoomSeq <= after || e.RoomSeq > r.NextAfterSeq {
				t.Fatalf("event %s seq %d outside (%d, %d]", e.EventId, e.RoomSeq, after, r.NextAfterSeq)
			}
			if !strings.HasPrefix(e.EventId, fmt.Sprintf("app:r1:%d:", e.RoomSeq)) || e.Payload == "" || e.CommandId == "" {
				t.Fatalf("event %+v", e)
			}
			prev = e.RoomSeq
			got = append(got, e.EventId)
		}
		if r.NextAfterSeq == after {
			break
		}
		after = r.NextAfterSeq
	}
	if want := logEventIDs(t, n.store, "r1", 0); !slices.Equal(got, want) {
		t.Fatalf("paged events differ from the log:\n got %v\nwant %v", got, want)
	}
	if calls < 7 { // 42 events in pages of at most 7
		t.Fatalf("%d calls", calls)
	}
	// Past the head, negative, unknown room: clear errors.
	if _, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 42}); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("after past head: %v", err)
	}
	if _, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: -1}); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("negative after: %v", err)
	}
	if _, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "nobody"}); !errors.Is(err, room.ErrRoomNotFound) {
		t.Fatalf("unknown room: %v", err)
	}
}

// A command's events are never split across pages, whatever the limit.
func TestListEventsKeepsACommandsEventsTogether(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	n.do(t, createCmd("r1", "c0"))
	n.do(t, joinCmd("r1", "c1", "bob"))
	for i := range 5 { // a gift: RoomGiftSent + RoomHeatChanged
		n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{CommandId: fmt.Sprint("g", i),
			AppCode: "app", RoomId: "r1", UserId: "owner", ToUserId: "bob", GiftId: "rose", GiftCount: 1}}})
	}
	r, err := n.client.ListEvents(context.Background(), &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 2, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The page is exactly the log's events of the commands in (2, next]:
	// a gift writes two or three events (the top contributors may change),
	// so the page ends on a command's last event whatever that count is.
	recs, err := n.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, rec := range recs {
		if rec.Seq > r.NextAfterSeq {
			break
		}
		for _, e := range rec.Events {
			want = append(want, e.EventID)
		}
	}
	var got []string
	for _, e := range r.Events {
		got = append(got, e.EventId)
	}
	if len(got) == 0 || r.Events[len(r.Events)-1].RoomSeq != r.NextAfterSeq || !slices.Equal(got, want) {
		t.Fatalf("page cut a command's events: got %v, next %d, want %v", got, r.NextAfterSeq, want)
	}
}

// Retention boundary: a client behind the purged log gets the resync
// error; GetRoom at its seq S plus the events after S is the live room.
func TestListEventsBelowRetentionAsksForResync(t *testing.T) {
	n := startEventsNode(t, nil, 10)
	n.do(t, createCmd("r1", "c0"))
	for i := range 24 {
		n.do(t, joinCmd("r1", fmt.Sprint("j", i), fmt.Sprint("u", i)))
	}
	// Purge everything the rules allow (at or below the snapshot, seq 20).
	if _, err := n.store.Purge(context.Background(), persistence.PurgeRequest{Table: persistence.PurgeCommandLog, CutoffMs: math.MaxInt64 / 2, Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, after := range []int64{0, 5, 19} {
		_, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: after})
		var te *TrimmedError
		if !errors.As(err, &te) || te.OldestAfterSeq != 20 || te.HeadSeq != 25 || te.After != after {
			t.Fatalf("after %d: %v, want a TrimmedError at 20/25", after, err)
		}
		if !errors.Is(err, errclass.Precondition) {
			t.Fatalf("trimmed is not a precondition error: %v", err)
		}
	}
	// The window's first seq is still served.
	if r, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 20}); err != nil || len(r.Events) != 5 {
		t.Fatalf("after 20: %v %v", r, err)
	}
	// Resync: GetRoom at S, more commands, then the events after S.
	got := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1", PageSize: 1000}}})
	s := got.RoomSeq
	if got.Room.Seq != s || s != 25 {
		t.Fatalf("GetRoom seq %d / view %d", s, got.Room.Seq)
	}
	members := map[string]bool{}
	for _, u := range got.Room.Members {
		members[u] = true
	}
	for i := range 6 {
		n.do(t, leaveCmd("r1", fmt.Sprint("l", i), fmt.Sprint("u", i)))
	}
	n.do(t, joinCmd("r1", "late", "zed"))
	r, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: s})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Events {
		ev, err := room.DecodeEvent(e.EventType, []byte(e.Payload))
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case room.RoomUserJoined:
			members[ev.UserID] = true
		case room.RoomUserLeft:
			delete(members, ev.UserID)
		}
	}
	live := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1", PageSize: 1000}}})
	if r.NextAfterSeq != live.RoomSeq || int64(len(members)) != live.Room.MemberCount {
		t.Fatalf("resynced to %d with %d members; live %d with %d", r.NextAfterSeq, len(members), live.RoomSeq, live.Room.MemberCount)
	}
	for _, u := range live.Room.Members {
		if !members[u] {
			t.Fatalf("resynced room lacks %s", u)
		}
	}
}

// collect is a watcher's received stream.
type collect struct {
	mu   sync.Mutex
	seqs []int64
	ids  []string
}

func (c *collect) send(r *v1.WatchRoomReply) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seqs = append(c.seqs, r.RoomSeq)
	for _, e := range r.Events {
		if e.RoomSeq != r.RoomSeq {
			return fmt.Errorf("event of seq %d in the message of %d", e.RoomSeq, r.RoomSeq)
		}
		c.ids = append(c.ids, e.EventId)
	}
	return nil
}

func (c *collect) last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seqs) == 0 {
		return 0
	}
	return c.seqs[len(c.seqs)-1]
}

func (c *collect) check(t *testing.T, name string, want []string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(c.seqs); i++ {
		if c.seqs[i] <= c.seqs[i-1] {
			t.Fatalf("%s: seq %d after %d", name, c.seqs[i], c.seqs[i-1])
		}
	}
	if !slices.Equal(c.ids, want) {
		t.Fatalf("%s: got %d events, want %d (the log)\n got %v\nwant %v", name, len(c.ids), len(want), c.ids, want)
	}
}

// Watchers that start before, during and after a burst of commands each
// get the log after their seq, in order, once, then the live events.
func TestWatchCatchesUpThenFollowsWithoutGaps(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	// Lost pushes must cost nothing but a read: a short check finds the
	// tail.
	w := &Watcher{Client: n.client, CheckInterval: 100 * time.Millisecond, Page: 7}
	n.do(t, createCmd("r1", "c0"))
	for i := range 10 {
		n.do(t, joinCmd("r1", fmt.Sprint("a", i), fmt.Sprint("u", i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type run struct {
		after int64
		c     *collect
		err   chan error
	}
	start := func(after int64) *run {
		r := &run{after: after, c: &collect{}, err: make(chan error, 1)}
		go func() { r.err <- w.Watch(ctx, "app", "r1", after, r.c.send) }()
		return r
	}
	runs := []*run{start(0), start(5)}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				user := fmt.Sprint("g", g)
				if i%2 == 0 {
					n.do(t, joinCmd("r1", fmt.Sprint("g", g, "-", i), user))
				} else {
					n.do(t, leaveCmd("r1", fmt.Sprint("g", g, "-", i), user))
				}
				if g == 0 && i == 20 {
					runs = append(runs, start(3))
				}
			}
		}()
	}
	wg.Wait()
	runs = append(runs, start(0))
	head := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}).RoomSeq
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range runs {
		for r.c.last() < head {
			if time.Now().After(deadline) {
				t.Fatalf("watcher after %d reached %d of %d", r.after, r.c.last(), head)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, r := range runs {
		r.c.check(t, fmt.Sprintf("watcher %d (after %d)", i, r.after), logEventIDs(t, n.store, "r1", r.after))
	}
	cancel()
	for _, r := range runs {
		if err := <-r.err; !errors.Is(err, context.Canceled) {
			t.Fatalf("watch ended with %v", err)
		}
	}
}

// A watcher that never reads is cut with its resume seq; the room's
// commands go on meanwhile, and resuming from that seq loses nothing.
func TestWatchCutsASlowReaderAndItResumes(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	metrics, _ := NewWatchMetrics(nil)
	w := &Watcher{Client: n.client, Buffer: 4, Metrics: metrics}
	n.do(t, createCmd("r1", "c0"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := make(chan struct{})
	slow := &collect{}
	ended := make(chan error, 1)
	go func() {
		ended <- w.Watch(ctx, "app", "r1", 0, func(r *v1.WatchRoomReply) error {
			if err := slow.send(r); err != nil {
				return err
			}
			if r.RoomSeq >= 3 {
				<-stuck // a client that stopped reading
			}
			return nil
		})
	}()
	for i := range 30 {
		begin := time.Now()
		n.do(t, joinCmd("r1", fmt.Sprint("j", i), fmt.Sprint("u", i)))
		if d := time.Since(begin); d > 2*time.Second {
			t.Fatalf("command %d took %s behind a stuck watcher", i, d)
		}
		if i == 2 {
			time.Sleep(50 * time.Millisecond) // let the watcher get stuck
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-deadline:
			t.Fatal("the stuck watcher was never cut")
		default:
		}
		if metrics.cutCount() > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stuck)
	err := <-ended
	var we *WatchEndedError
	if !errors.As(err, &we) || !we.Cut || we.ResumeAfter != slow.last() {
		t.Fatalf("cut watcher ended with %v (last sent %d)", err, slow.last())
	}
	if !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("a cut is not retryable: %v", err)
	}
	// Resume where it was cut.
	rest := &collect{}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Watch(rctx, "app", "r1", we.ResumeAfter, rest.send) }()
	for rest.last() < 31 {
		time.Sleep(10 * time.Millisecond)
	}
	rcancel()
	<-done
	all := &collect{ids: append(slices.Clone(slow.ids), rest.ids...), seqs: append(slices.Clone(slow.seqs), rest.seqs...)}
	all.check(t, "cut + resumed", logEventIDs(t, n.store, "r1", 0))
}

func (m *WatchMetrics) cutCount() float64 { return testutil.ToFloat64(m.Cuts) }

// Draining the node ends every stream with its resume seq.
func TestWatchEndsOnDrainWithItsResumeSeq(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	w := &Watcher{Client: n.client}
	n.do(t, createCmd("r1", "c0"))
	n.do(t, joinCmd("r1", "c1", "bob"))
	c := &collect{}
	ended := make(chan error, 1)
	go func() { ended <- w.Watch(context.Background(), "app", "r1", 0, c.send) }()
	for c.last() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	w.Close()
	var we *WatchEndedError
	if err := <-ended; !errors.As(err, &we) || we.ResumeAfter != 2 || we.Reason != EndDraining {
		t.Fatalf("drain ended the watch with %v", err)
	}
	if err := w.Watch(context.Background(), "app", "r1", 2, c.send); !errors.As(err, &we) || we.Reason != EndDraining {
		t.Fatalf("a watch on a drained node: %v", err)
	}
}

// When the room's activation stops (passivation, a move, a restart) its
// watchers end with their resume seq and resume on the next activation.
func TestWatchEndsWhenTheActivationStopsAndResumes(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	w := &Watcher{Client: n.client}
	n.do(t, createCmd("r1", "c0"))
	n.do(t, joinCmd("r1", "c1", "bob"))
	c := &collect{}
	ended := make(chan error, 1)
	go func() { ended <- w.Watch(context.Background(), "app", "r1", 0, c.send) }()
	for c.last() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	pid := n.member.Cluster.Get("app/r1", roomgrain.Kind)
	n.member.Cluster.ActorSystem.Root.Poison(pid)
	var we *WatchEndedError
	select {
	case err := <-ended:
		if !errors.As(err, &we) || we.ResumeAfter != 2 || we.Reason != EndMoved {
			t.Fatalf("a stopped activation ended the watch with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its room's activation")
	}
	n.do(t, leaveCmd("r1", "c2", "bob")) // the next activation
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx, "app", "r1", we.ResumeAfter, c.send) }()
	n.do(t, joinCmd("r1", "c3", "bob"))
	for c.last() < 4 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	c.check(t, "across activations", logEventIDs(t, n.store, "r1", 0))
}

// A batch watch: while a burst is written, a message carries the events
// of several room_seqs, in order, its RoomSeq the newest of them; every
// event of the log after the watcher's seq arrives once, in order (from
// the catch-up read and the pushes alike), each with its encoding as
// proto.Marshal makes it. A plain watch of the same room gets one seq a
// message.
func TestBatchWatchSendsSeveralSeqsAMessageInOrder(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	w := &Watcher{Client: n.client, Page: 7, Linger: 30 * time.Millisecond}
	n.do(t, createCmd("r1", "c0"))
	for i := range 20 {
		n.do(t, joinCmd("r1", fmt.Sprint("a", i), fmt.Sprint("u", i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var ids []string
	var last int64 = 2
	multi, bad := 0, ""
	batchErr := make(chan error, 1)
	go func() {
		batchErr <- w.WatchMessages(ctx, "app", "r1", last, true, nil, func(m Message) error {
			mu.Lock()
			defer mu.Unlock()
			if len(m.Wire) != len(m.Reply.Events) && bad == "" {
				bad = fmt.Sprintf("message of seq %d: %d encodings for %d events", m.Reply.RoomSeq, len(m.Wire), len(m.Reply.Events))
			}
			seqs := map[int64]bool{}
			for i, e := range m.Reply.Events {
				if (e.RoomSeq < last || (e.RoomSeq == last && len(seqs) == 0)) && bad == "" {
					bad = fmt.Sprintf("event of seq %d after %d", e.RoomSeq, last)
				}
				last = e.RoomSeq
				seqs[e.RoomSeq] = true
				ids = append(ids, e.EventId)
				if i < len(m.Wire) {
					if want, _ := proto.Marshal(e); !bytes.Equal(m.Wire[i], want) && bad == "" {
						bad = fmt.Sprintf("event %s: its encoding is not proto.Marshal's", e.EventId)
					}
				}
			}
			if m.Reply.RoomSeq != last && bad == "" {
				bad = fmt.Sprintf("message of seq %d ends with the event of %d", m.Reply.RoomSeq, last)
			}
			if len(seqs) > 1 {
				multi++
			}
			return nil
		})
	}()
	plain := &collect{}
	plainErr := make(chan error, 1)
	go func() { plainErr <- w.Watch(ctx, "app", "r1", 2, plain.send) }()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				user := fmt.Sprint("g", g)
				if i%2 == 0 {
					n.do(t, joinCmd("r1", fmt.Sprint("g", g, "-", i), user))
				} else {
					n.do(t, leaveCmd("r1", fmt.Sprint("g", g, "-", i), user))
				}
			}
		}()
	}
	wg.Wait()
	head := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}).RoomSeq
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := last >= head
		mu.Unlock()
		if done && plain.last() >= head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watchers at %d and %d of %d", last, plain.last(), head)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	for _, c := range []chan error{batchErr, plainErr} {
		if err := <-c; !errors.Is(err, context.Canceled) {
			t.Fatalf("watch ended with %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != "" {
		t.Fatal(bad)
	}
	if want := logEventIDs(t, n.store, "r1", 2); !slices.Equal(ids, want) {
		t.Fatalf("batch watch: got %d events, want %d (the log)\n got %v\nwant %v", len(ids), len(want), ids, want)
	}
	if multi == 0 {
		t.Fatal("no message carried more than one room_seq")
	}
	plain.check(t, "plain watch", logEventIDs(t, n.store, "r1", 2)) // collect.send refuses a second seq in a message
}
