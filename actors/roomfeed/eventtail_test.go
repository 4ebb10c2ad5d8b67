package roomfeed

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// tailModel is the log the tail stands for: commit seq → its events.
type tailModel [][]*v1.RoomLogEvent // index seq-1

// read is the store path's answer (readEvents) over the model.
func (m tailModel) read(after int64, limit int) ([]*v1.RoomLogEvent, int64) {
	var out []*v1.RoomLogEvent
	next := after
	for seq := after + 1; seq <= int64(len(m)) && seq-after <= int64(limit); seq++ {
		evs := m[seq-1]
		if len(out) > 0 && len(out)+len(evs) > limit {
			break
		}
		out = append(out, evs...)
		next = seq
	}
	return out, next
}

// TestEventTailReadsAsTheLogDoes: under random commits (0 to 3 events,
// some past the trim), backward fills and reads at random seqs and
// limits, every read the tail answers is what the log answers, and it
// answers every read it reaches back to, each event with its own
// encoding; an append never shows in a slice handed out before.
func TestEventTailReadsAsTheLogDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var m tailModel
		commit := func() []*v1.RoomLogEvent {
			seq := int64(len(m) + 1)
			n := rng.IntN(4)
			if rng.IntN(50) == 0 {
				n = tailKeep + rng.IntN(tailKeep) // one commit past the trim
			}
			evs := make([]*v1.RoomLogEvent, n)
			for i := range evs {
				evs[i] = &v1.RoomLogEvent{RoomSeq: seq, EventId: fmt.Sprintf("e%d.%d", seq, i), CreatedAtMs: 1}
			}
			m = append(m, evs)
			return evs
		}
		for range rng.IntN(300) {
			commit()
		}
		tl := &eventTail{base: int64(len(m))}
		served := 0
		for range 2000 {
			switch op := rng.IntN(10); {
			case op < 4:
				evs := commit()
				tl.add(int64(len(m)), evs, encodeEvents(evs))
			case op < 5 && tl.base > 0:
				// A store read that reaches the tail fills it.
				after := rng.Int64N(tl.base)
				evs, next := m.read(after, 1+rng.IntN(MaxEventsLimit))
				if next >= tl.base {
					tl.prepend(after, evs, encodeEvents(evs))
				}
			default:
				if len(m) == 0 {
					continue
				}
				after := rng.Int64N(int64(len(m)))
				limit := 1 + rng.IntN(300)
				got, wire, next, ok := tl.read(after, limit, 0)
				if !ok {
					if after >= tl.base {
						t.Fatalf("round %d: tail (%d, %d] refused a read after %d", round, tl.base, tl.head(), after)
					}
					continue
				}
				served++
				want, wantNext := m.read(after, limit)
				if next != wantNext || !slices.Equal(got, want) {
					t.Fatalf("round %d: after %d limit %d: tail %d events to %d, log %d to %d", round, after, limit, len(got), next, len(want), wantNext)
				}
				if len(got) != cap(got) || len(wire) != cap(wire) {
					t.Fatalf("a reply's slice may grow into the tail: len %d cap %d, wire len %d cap %d", len(got), cap(got), len(wire), cap(wire))
				}
				if len(wire) != len(got) {
					t.Fatalf("%d events, %d encodings", len(got), len(wire))
				}
				for i, e := range got {
					if b, _ := proto.Marshal(e); !bytes.Equal(b, wire[i]) {
						t.Fatalf("round %d: event %s kept with another's encoding", round, e.EventId)
					}
				}
				before, beforeWire := slices.Clone(got), slices.Clone(wire)
				evs := commit()
				tl.add(int64(len(m)), evs, encodeEvents(evs))
				if !slices.Equal(got, before) || !slices.EqualFunc(wire, beforeWire, bytes.Equal) {
					t.Fatal("an append changed a slice handed out")
				}
			}
			if n := len(tl.events); n > 2*tailKeep && len(tl.ends) > 1 {
				t.Fatalf("tail holds %d events over %d commits", n, len(tl.ends))
			}
			if tl.head() != int64(len(m)) {
				t.Fatalf("tail head %d, log head %d", tl.head(), len(m))
			}
		}
		if served == 0 {
			t.Fatalf("round %d: the tail served no read", round)
		}
	}
}

// The tail leaves to the store what is older than the retention.
func TestEventTailServesNothingPastRetention(t *testing.T) {
	tl := &eventTail{}
	for seq := int64(1); seq <= 10; seq++ {
		evs := []*v1.RoomLogEvent{{RoomSeq: seq, CreatedAtMs: seq * 1000}}
		tl.add(seq, evs, encodeEvents(evs))
	}
	if _, _, _, ok := tl.read(2, 5, 3001); ok {
		t.Fatal("served an event older than the retention")
	}
	if evs, _, next, ok := tl.read(3, 5, 3001); !ok || len(evs) != 5 || next != 8 {
		t.Fatalf("after 3: %d events to %d, ok %v", len(evs), next, ok)
	}
}

// TestListEventsFromTheTailEqualsTheStore: one room of mixed commands
// (gifts of two events among joins and leaves), read by ListRoomEvents at
// random seqs and limits while it keeps committing: every answer equals
// the store path's read of the same range, whether the tail or the store
// answered, and reads near the head were answered by the tail (the same
// messages twice). Every page carries each event's own encoding, as
// proto.Marshal makes it (the caller is on the owner's node).
func TestListEventsFromTheTailEqualsTheStore(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	n.do(t, createCmd("r1", "c0"))
	cfg := configs.Default()
	storeRead := New(Config{StoreTimeout: cfg.Room.StoreTimeout})
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	cmdNo, fromTail := 0, 0
	next := func() *v1.RoomCommand {
		cmdNo++
		id := fmt.Sprint("c", cmdNo)
		switch cmdNo % 3 {
		case 0:
			return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{CommandId: id,
				AppCode: "app", RoomId: "r1", UserId: "owner", ToUserId: "carol", GiftId: "rose", GiftCount: 1}}}
		case 1:
			return joinCmd("r1", id, "bob")
		}
		return leaveCmd("r1", id, "bob")
	}
	n.do(t, joinCmd("r1", "carol", "carol"))
	for range 300 {
		n.do(t, next())
	}
	for i := range 400 {
		for range rng.IntN(3) {
			n.do(t, next())
		}
		head := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}).RoomSeq
		after := head - 1 - rng.Int64N(min(head, 400))
		if i%4 == 0 {
			after = rng.Int64N(head)
		}
		limit := int32(1 + rng.IntN(200))
		req := &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: after, Limit: limit}
		page, err := n.client.ListEventsPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := page.Reply
		if len(page.Wire) != len(got.Events) {
			t.Fatalf("after %d: %d events, %d encodings", after, len(got.Events), len(page.Wire))
		}
		for i, e := range got.Events {
			if b, _ := proto.Marshal(e); !bytes.Equal(b, page.Wire[i]) {
				t.Fatalf("after %d: event %s sent with another encoding", after, e.EventId)
			}
		}
		want := storeRead.readEvents(n.store, key, after, got.HeadSeq, int(limit))
		if want.Error != nil {
			t.Fatalf("store read: %v", want.Error)
		}
		if !proto.Equal(got, want.Reply) {
			t.Fatalf("after %d limit %d head %d: got %d events to %d, store %d to %d", after, limit, got.HeadSeq,
				len(got.Events), got.NextAfterSeq, len(want.Reply.Events), want.Reply.NextAfterSeq)
		}
		again, err := n.client.ListEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.HeadSeq == got.HeadSeq && len(again.Events) > 0 && again.Events[0] == got.Events[0] {
			fromTail++
		}
	}
	if fromTail < 100 {
		t.Fatalf("only %d of 400 reads came from the tail", fromTail)
	}
}

// A read right after a commit sees it: the tail is appended before the
// command's reply, so a client that saw the reply reads its events.
func TestListEventsSeesTheCommitJustMade(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	n.do(t, createCmd("r1", "c0"))
	ctx := context.Background()
	for i := range 300 {
		rc := joinCmd("r1", fmt.Sprint("c", i+1), "bob")
		if i%2 == 1 {
			rc = leaveCmd("r1", fmt.Sprint("c", i+1), "bob")
		}
		reply := n.do(t, rc)
		got, err := n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: reply.RoomSeq - 1})
		if err != nil {
			t.Fatal(err)
		}
		if got.HeadSeq != reply.RoomSeq || got.NextAfterSeq != reply.RoomSeq || len(got.Events) != 1 || got.Events[0].EventId != reply.EventIds[0] {
			t.Fatalf("after commit %d: head %d next %d events %v", reply.RoomSeq, got.HeadSeq, got.NextAfterSeq, got.Events)
		}
	}
}

// A read that ends short of the head still grows the tail back over it
// (its store read goes on to the tail), so the same read again is a slice
// of the tail: the same messages.
func TestListEventsShortOfTheHeadFillsTheTail(t *testing.T) {
	n := startEventsNode(t, nil, 0)
	n.do(t, createCmd("r1", "c0"))
	for i := range 300 {
		rc := joinCmd("r1", fmt.Sprint("c", i+1), "bob")
		if i%2 == 1 {
			rc = leaveCmd("r1", fmt.Sprint("c", i+1), "bob")
		}
		n.do(t, rc)
	}
	ctx := context.Background()
	req := &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 150, Limit: 100}
	first, err := n.client.ListEvents(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.NextAfterSeq != 250 || len(first.Events) != 100 {
		t.Fatalf("first read: %d events to %d", len(first.Events), first.NextAfterSeq)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := n.client.ListEvents(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(again, first) {
			t.Fatalf("the read changed: %d events to %d", len(again.Events), again.NextAfterSeq)
		}
		third, _ := n.client.ListEvents(ctx, req)
		if third.Events[0] == again.Events[0] {
			return // served from the tail
		}
		if time.Now().After(deadline) {
			t.Fatal("a read 50 commits short of the head never came from the tail")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
