package roomfeed

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// acceptLog records a watch's accept and sends, in order.
type acceptLog struct {
	mu       sync.Mutex
	steps    []int64 // 0: accepted, else a sent room_seq
	accepted chan struct{}
}

func newAcceptLog() *acceptLog { return &acceptLog{accepted: make(chan struct{})} }

func (l *acceptLog) accept() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, 0)
	if len(l.steps) == 1 {
		close(l.accepted)
	}
	return nil
}

func (l *acceptLog) send(r *v1.WatchRoomReply) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, r.RoomSeq)
	return nil
}

func (l *acceptLog) snapshot() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.steps...)
}

// A watch is accepted, once, as soon as the owner took it: on an idle
// room before any event exists to send, on a room with a backlog before
// the first of it; a room that does not exist is never accepted.
func TestWatchIsAcceptedBeforeAnyEvent(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	w := &Watcher{Client: n.client}
	defer w.Close()
	n.do(t, createCmd("r1", "c0"))
	n.do(t, joinCmd("r1", "c1", "bob"))
	head := n.do(t, joinCmd("r1", "c2", "carol")).RoomSeq
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	idle, backlog := newAcceptLog(), newAcceptLog()
	errs := make(chan error, 2)
	go func() { errs <- w.WatchAccepted(ctx, "app", "r1", head, idle.accept, idle.send) }()
	go func() { errs <- w.WatchAccepted(ctx, "app", "r1", 0, backlog.accept, backlog.send) }()
	for name, l := range map[string]*acceptLog{"idle": idle, "backlog": backlog} {
		select {
		case <-l.accepted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s watch: not accepted in 10 s", name)
		}
	}
	time.Sleep(200 * time.Millisecond) // an event sent by mistake shows by now
	if got := idle.snapshot(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("idle room: steps %v, want the accept alone", got)
	}
	next := n.do(t, leaveCmd("r1", "c3", "bob")).RoomSeq
	deadline := time.Now().Add(10 * time.Second)
	for _, l := range []*acceptLog{idle, backlog} {
		for {
			got := l.snapshot()
			if got[len(got)-1] == next {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the watch did not reach seq %d: %v", next, got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got := idle.snapshot(); len(got) != 2 || got[0] != 0 || got[1] != next {
		t.Fatalf("idle room: steps %v, want [0 %d]", got, next)
	}
	got := backlog.snapshot()
	if got[0] != 0 || len(got) != int(next)+1 {
		t.Fatalf("backlog: steps %v, want the accept then seqs 1..%d", got, next)
	}
	for i, seq := range got[1:] {
		if seq != int64(i+1) {
			t.Fatalf("backlog: steps %v, want the accept then seqs 1..%d", got, next)
		}
	}

	missing := newAcceptLog()
	err := w.WatchAccepted(ctx, "app", "nope", 0, missing.accept, missing.send)
	if !errors.Is(err, room.ErrRoomNotFound) {
		t.Fatalf("watch of a missing room: %v, want not found", err)
	}
	if got := missing.snapshot(); len(got) != 0 {
		t.Fatalf("a missing room's watch was accepted: %v", got)
	}
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("watch ended with %v", err)
		}
	}
}

// A cursor past the room's head (or MaxInt64) is refused before the watch
// is accepted, as ListRoomEvents refuses it, instead of silently skipping
// the events up to it; the head itself is a valid cursor.
func TestWatchRefusesACursorPastTheHead(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	w := &Watcher{Client: n.client}
	defer w.Close()
	n.do(t, createCmd("r1", "c0"))
	head := n.do(t, joinCmd("r1", "c1", "bob")).RoomSeq
	for _, after := range []int64{head + 1, head + 100, math.MaxInt64} {
		l := newAcceptLog()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.WatchAccepted(ctx, "app", "r1", after, l.accept, l.send)
		cancel()
		if !errors.Is(err, errclass.Invalid) || len(l.snapshot()) != 0 {
			t.Fatalf("after %d (head %d): %v, steps %v; want Invalid before any accept", after, head, err, l.snapshot())
		}
		if _, lerr := n.client.ListEvents(context.Background(), &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: after}); !errors.Is(lerr, errclass.Invalid) {
			t.Fatalf("ListRoomEvents after %d: %v, want the same refusal", after, lerr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := newAcceptLog()
	done := make(chan error, 1)
	go func() { done <- w.WatchAccepted(ctx, "app", "r1", head, l.accept, l.send) }()
	select {
	case <-l.accepted:
	case err := <-done:
		t.Fatalf("a watch from the head ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a watch from the head was not accepted in 10 s")
	}
	next := n.do(t, joinCmd("r1", "c2", "carol")).RoomSeq
	deadline := time.Now().Add(10 * time.Second)
	for got := l.snapshot(); got[len(got)-1] != next; got = l.snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("the watch from the head got %v, want seq %d next", got, next)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
