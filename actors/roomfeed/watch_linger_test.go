package roomfeed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// batchCollect is a batch watcher's received stream: every event in
// order, each message's seq that of its newest event.
type batchCollect struct {
	mu   sync.Mutex
	seq  int64 // newest seq received
	ids  []string
	bad  string
	msgs int
}

func (c *batchCollect) add(roomSeq int64, events []*v1.RoomLogEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs++
	for _, e := range events {
		if e.RoomSeq < c.seq && c.bad == "" {
			c.bad = fmt.Sprintf("event of seq %d after %d", e.RoomSeq, c.seq)
		}
		c.seq = e.RoomSeq
		c.ids = append(c.ids, e.EventId)
	}
	if roomSeq != c.seq && c.bad == "" {
		c.bad = fmt.Sprintf("message of seq %d ends with the event of %d", roomSeq, c.seq)
	}
}

func (c *batchCollect) last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// framedEvents decodes a Frames message as a client decodes the reply's
// events field.
func framedEvents(fr Frames) ([]*v1.RoomLogEvent, error) {
	b := bytes.Join(fr.Events, nil)
	var out []*v1.RoomLogEvent
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != eventsField || typ != protowire.BytesType {
			return nil, fmt.Errorf("not an events field at %d bytes from the end", len(b))
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		e := &v1.RoomLogEvent{}
		if err := proto.Unmarshal(v, e); err != nil {
			return nil, err
		}
		out = append(out, e)
		b = b[n+m:]
	}
	if len(out) != fr.Count {
		return nil, fmt.Errorf("%d events framed, message says %d", len(out), fr.Count)
	}
	return out, nil
}

// A watcher behind because the node lingers is never cut, however many
// watch and however bursty the writes: with a buffer of 32 commits and a
// linger of 40ms×3 (300 watchers), each burst of 100 commits leaves
// every lingering watcher three buffers behind unless its linger ends at
// half a buffer. Only the watcher whose client stops reading is cut. The
// rest each receive every event once, in order, up to the head, in
// messages (half of them) and in frames (the other half: decoded as a
// client decodes them).
func TestWatchLingerNeverCutsAWatcher(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	metrics, _ := NewWatchMetrics(nil)
	w := &Watcher{Client: n.client, Buffer: 32, Linger: 40 * time.Millisecond, SendStall: 300 * time.Millisecond, Metrics: metrics}
	n.do(t, createCmd("r1", "c0"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watchers = 300
	cs := make([]*batchCollect, watchers)
	errs := make(chan error, watchers)
	for i := range cs {
		c := &batchCollect{}
		cs[i] = c
		go func() {
			if i%2 == 0 {
				errs <- w.WatchMessages(ctx, "app", "r1", 1, true, nil, func(m Message) error {
					c.add(m.Reply.RoomSeq, m.Reply.Events)
					return nil
				})
				return
			}
			errs <- w.WatchFrames(ctx, "app", "r1", 1, true, nil, func(fr Frames) error {
				events, err := framedEvents(fr)
				if err != nil {
					return err
				}
				c.add(fr.RoomSeq, events)
				return nil
			})
		}()
	}
	// A client that stops reading after its first message.
	stuck := make(chan struct{})
	release := sync.OnceFunc(func() { close(stuck) })
	defer release()
	stuckErr := make(chan error, 1)
	go func() {
		first := true
		stuckErr <- w.Watch(ctx, "app", "r1", 1, func(*v1.WatchRoomReply) error {
			if !first {
				<-stuck
			}
			first = false
			return nil
		})
	}()
	for burst := range 6 {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprint("g", g)
				for i := range 25 {
					id := fmt.Sprint("b", burst, "-", g, "-", i)
					if i%2 == 0 {
						n.do(t, joinCmd("r1", id, user))
					} else {
						n.do(t, leaveCmd("r1", id, user))
					}
				}
			}()
		}
		wg.Wait()
		time.Sleep(150 * time.Millisecond)
	}
	head := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}).RoomSeq
	deadline := time.Now().Add(20 * time.Second)
	for i, c := range cs {
		for c.last() < head {
			if time.Now().After(deadline) {
				t.Fatalf("watcher %d at %d of %d (cuts %v)", i, c.last(), head, metrics.cutCount())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The stuck one: cut once its send has waited SendStall (a fanout
	// sees it: the feed's check makes one every CheckInterval).
	for wait := time.Now().Add(10 * time.Second); metrics.cutCount() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the stuck watcher was never cut")
		}
	}
	release()
	var we *WatchEndedError
	if err := <-stuckErr; !errors.As(err, &we) || !we.Cut || we.ResumeAfter < 2 {
		t.Fatalf("the stuck watcher ended with %v", err)
	}
	if got := metrics.cutCount(); got != 1 {
		t.Fatalf("%v watchers cut, want the stuck one alone", got)
	}
	want := logEventIDs(t, n.store, "r1", 1)
	for i, c := range cs {
		c.mu.Lock()
		if c.bad != "" {
			t.Fatalf("watcher %d: %s", i, c.bad)
		}
		if !slices.Equal(c.ids, want) {
			t.Fatalf("watcher %d: %d events, want the log's %d", i, len(c.ids), len(want))
		}
		c.mu.Unlock()
	}
	cancel()
	for range watchers {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a watcher ended with %v", err)
		}
	}
}

// The wait after a round keeps a room's messages on the node near
// lingerPer ÷ Linger a second, and its watchers' rounds near half a core:
// the longer of Linger per 100 watchers and watchers × a round's cost ÷
// 0.5, never below Linger, never above maxLinger (nor below Linger when
// Linger is longer).
func TestLingerForBoundsARoomsSends(t *testing.T) {
	for _, c := range []struct {
		linger   time.Duration
		watchers int64
		round    time.Duration
		want     time.Duration
	}{
		{5 * time.Millisecond, 1, 20 * time.Microsecond, 5 * time.Millisecond},
		{5 * time.Millisecond, 100, 20 * time.Microsecond, 5 * time.Millisecond},
		{5 * time.Millisecond, 1000, time.Microsecond, 50 * time.Millisecond},
		{5 * time.Millisecond, 1000, 20 * time.Microsecond, 50 * time.Millisecond},
		{5 * time.Millisecond, 1000, 40 * time.Microsecond, 80 * time.Millisecond},
		{5 * time.Millisecond, 1000, 60 * time.Microsecond, maxLinger},
		{5 * time.Millisecond, 10000, time.Microsecond, maxLinger},
		{5 * time.Millisecond, 0, 0, 5 * time.Millisecond},
		{300 * time.Millisecond, 10000, 20 * time.Microsecond, 300 * time.Millisecond},
	} {
		f := &feed{}
		f.watchers.Store(c.watchers)
		f.roundNs.Store(int64(c.round))
		if got := (&Watcher{Linger: c.linger}).lingerFor(f); got != c.want {
			t.Errorf("linger %s, %d watchers, round %s: waits %s, want %s", c.linger, c.watchers, c.round, got, c.want)
		}
	}
	// A round that waited on its client counts maxRoundSample at most.
	f := &feed{}
	for range 200 {
		f.measureRound(int64(5 * time.Second))
	}
	if got := time.Duration(f.roundNs.Load()); got > maxRoundSample {
		t.Fatalf("rounds that waited 5s on their clients average %s", got)
	}
}
