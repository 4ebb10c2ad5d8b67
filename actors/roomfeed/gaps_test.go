package roomfeed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// lossyIM stands for the IM group of each room as its clients see it:
// the room's publisher sends every IM event, and the client gets it or
// not (20% dropped), sometimes after the one sent next (reordered).
type lossyIM struct {
	mu                            sync.Mutex
	rng                           *rand.Rand
	clients                       map[string]chan persistence.Envelope
	held                          map[string]*persistence.Envelope // per room: one event held back to be swapped
	sent                          map[string]int64                 // per room: newest seq the publisher sent
	dropped, reordered, delivered atomic.Int64
}

func (im *lossyIM) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.sent[env.RoomID] = max(im.sent[env.RoomID], env.RoomSeq)
	if !room.IsIMEvent(env.EventType) {
		return nil // as the real publisher: not a group message
	}
	ch := im.clients[env.RoomID]
	if im.rng.Float64() < 0.2 {
		im.dropped.Add(1)
		return nil
	}
	if h := im.held[env.RoomID]; h != nil {
		delete(im.held, env.RoomID)
		ch <- env
		ch <- *h
		im.delivered.Add(2)
		im.reordered.Add(1)
		return nil
	}
	if im.rng.Float64() < 0.1 {
		im.held[env.RoomID] = &env
		return nil
	}
	ch <- env
	im.delivered.Add(1)
	return nil
}

// flush delivers what is held back (the network settles).
func (im *lossyIM) flush() {
	im.mu.Lock()
	defer im.mu.Unlock()
	for roomID, h := range im.held {
		im.clients[roomID] <- *h
		im.delivered.Add(1)
	}
	clear(im.held)
}

// simClient rebuilds one room the way docs/client-protocol.md says: the
// state confirmed from the log up to seq c, IM events after c kept as an
// optimistic tail, and a fill from the log (ListRoomEvents after c)
// whenever IM skips a seq.
type simClient struct {
	t       *testing.T
	client  Client
	roomID  string
	state   room.State // the room at c, from the log only
	c       int64
	tail    map[string]bool // event ids of IM events after c
	seen    int64           // newest seq seen on IM or in the log
	applied map[string]int  // times each event was applied to state
	fills   int
}

func (sc *simClient) onIM(env persistence.Envelope) {
	if env.RoomSeq <= sc.c || sc.tail[env.EventID] {
		return // a duplicate or an event the log already gave
	}
	if env.RoomSeq > sc.seen+1 {
		sc.fill() // a skipped seq: lost, or a command without IM events
	}
	if env.RoomSeq <= sc.c {
		return
	}
	sc.tail[env.EventID] = true
	sc.seen = max(sc.seen, env.RoomSeq)
}

func (sc *simClient) fill() {
	sc.fills++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		r, err := sc.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: sc.roomID, AfterRoomSeq: sc.c, Limit: 50})
		if err != nil {
			sc.t.Errorf("room %s: fill after %d: %v", sc.roomID, sc.c, err)
			return
		}
		for _, e := range r.Events {
			ev, err := room.DecodeEvent(e.EventType, []byte(e.Payload))
			if err != nil {
				sc.t.Errorf("room %s: %v", sc.roomID, err)
				return
			}
			sc.state.ApplyInPlace(e.RoomSeq, []room.Event{ev})
			sc.applied[e.EventId]++
		}
		sc.c = r.NextAfterSeq
		if sc.c >= r.HeadSeq {
			break
		}
	}
	for id := range sc.tail {
		if seqOfEventID(id) <= sc.c {
			delete(sc.tail, id)
		}
	}
	sc.seen = max(sc.seen, sc.c)
}

func seqOfEventID(id string) int64 {
	var app, roomID string
	var seq int64
	var i int
	// "<app>:<room>:<seq>:<i>"; the test's ids have no ':' of their own.
	if _, err := fmt.Sscanf(replaceColons(id), "%s %s %d %d", &app, &roomID, &seq, &i); err != nil {
		return -1
	}
	return seq
}

func replaceColons(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == ':' {
			b[i] = ' '
		}
	}
	return string(b)
}

// Gaps: 50 rooms under mixed load; IM drops 20% of group messages and
// reorders some. Each room's client, rebuilding from IM plus the log on
// every gap, ends equal to GetRoom, with every event of the log applied
// exactly once.
func TestClientsRebuildRoomsFromLossyIMAndTheLog(t *testing.T) {
	const rooms = 50
	im := &lossyIM{rng: rand.New(rand.NewPCG(1, 2)), clients: map[string]chan persistence.Envelope{},
		held: map[string]*persistence.Envelope{}, sent: map[string]int64{}}
	for i := range rooms {
		im.clients[fmt.Sprint("g", i)] = make(chan persistence.Envelope, 1<<14)
	}
	n := startEventsNode(t, im, 20)
	clients := make([]*simClient, rooms)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range rooms {
		roomID := fmt.Sprint("g", i)
		sc := &simClient{t: t, client: n.client, roomID: roomID, state: room.NewState("app", roomID),
			tail: map[string]bool{}, applied: map[string]int{}}
		clients[i] = sc
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := im.clients[roomID]
			for {
				select {
				case env := <-ch:
					sc.onIM(env)
				case <-stop:
					for {
						select {
						case env := <-ch:
							sc.onIM(env)
						default:
							return
						}
					}
				}
			}
		}()
	}
	for i := range rooms {
		n.do(t, createCmd(fmt.Sprint("g", i), "create"))
	}
	// Mixed load: joins, leaves, mics, gifts, kicks; rule rejections are
	// part of it.
	var load sync.WaitGroup
	var commands, rejected atomic.Int64
	for w := range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			ctx := context.Background()
			for k := range 400 {
				roomID := fmt.Sprint("g", rng.IntN(rooms))
				user := fmt.Sprint("u", rng.IntN(8))
				other := fmt.Sprint("u", rng.IntN(8))
				id := fmt.Sprintf("w%d-%d", w, k)
				var rc *v1.RoomCommand
				switch rng.IntN(7) {
				case 0, 1:
					rc = joinCmd(roomID, id, user)
				case 2:
					rc = leaveCmd(roomID, id, user)
				case 3:
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_TakeMic{TakeMic: &v1.TakeMicRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user, Seat: int32(rng.IntN(8))}}}
				case 4:
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_ReleaseMic{ReleaseMic: &v1.ReleaseMicRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user}}}
				case 5:
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user, ToUserId: other, GiftId: "rose", GiftCount: 1}}}
				case 6:
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_KickUser{KickUser: &v1.KickUserRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: other}}}
				}
				commands.Add(1)
				if _, err := n.client.Execute(ctx, rc); err != nil {
					rejected.Add(1)
				}
			}
		}()
	}
	load.Wait()
	// IM settles: the publishers stop sending. (An event a room's
	// publisher leaves to the outbox relay, which this test does not run,
	// never reaches the client: one more loss.)
	quiet := func() int64 { return im.delivered.Load() + im.dropped.Load() }
	for prev := int64(-1); prev != quiet(); {
		prev = quiet()
		time.Sleep(500 * time.Millisecond)
	}
	im.flush()
	close(stop)
	wg.Wait()
	if im.dropped.Load() == 0 || im.reordered.Load() == 0 {
		t.Fatalf("the faults did not happen: %d dropped, %d reordered", im.dropped.Load(), im.reordered.Load())
	}
	fills, events := 0, 0
	for _, sc := range clients {
		// The client's quiet-time check: one more read of the log after it.
		sc.fill()
		fills += sc.fills
		got := n.do(t, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: sc.roomID, PageSize: 1000}}})
		mine := room.Summary(sc.state)
		var members []string
		for u := range sc.state.Members {
			members = append(members, u)
		}
		slices.Sort(members)
		if sc.c != got.RoomSeq || mine.Heat != got.Room.Heat || mine.Status != got.Room.Status ||
			!slices.Equal(members, got.Room.Members) || fmt.Sprint(mine.Seats) != fmt.Sprint(got.Room.Seats) {
			t.Errorf("room %s: client at %d heat %d members %v seats %v; GetRoom at %d heat %d members %v seats %v",
				sc.roomID, sc.c, mine.Heat, members, mine.Seats, got.RoomSeq, got.Room.Heat, got.Room.Members, got.Room.Seats)
		}
		log := logEventIDs(t, n.store, sc.roomID, 0)
		events += len(log)
		for _, id := range log {
			if sc.applied[id] != 1 {
				t.Errorf("room %s: event %s applied %d times", sc.roomID, id, sc.applied[id])
			}
		}
		if len(sc.applied) != len(log) {
			t.Errorf("room %s: client applied %d events, the log has %d", sc.roomID, len(sc.applied), len(log))
		}
	}
	t.Logf("%d commands (%d rejected), %d events; IM: %d delivered, %d dropped, %d reordered; %d fills",
		commands.Load(), rejected.Load(), events, im.delivered.Load(), im.dropped.Load(), im.reordered.Load(), fills)
}
