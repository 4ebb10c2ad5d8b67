package roomgrain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// imRecorder is an IM with a latency per event, one room's events sent
// one at a time in the order queued (a room's IM queue), that records
// when each event id first arrived and each room's order of first
// arrivals.
type imRecorder struct {
	delay time.Duration
	mu    sync.Mutex
	rooms map[string]chan func()
	first map[string]time.Time
	order map[string][]string // room id -> event ids, first arrivals
	sends int
}

func newIMRecorder(delay time.Duration) *imRecorder {
	return &imRecorder{delay: delay, rooms: map[string]chan func(){}, first: map[string]time.Time{}, order: map[string][]string{}}
}

func (r *imRecorder) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	done := make(chan error, 1)
	r.mu.Lock()
	q, ok := r.rooms[env.RoomID]
	if !ok {
		q = make(chan func(), 1<<16)
		r.rooms[env.RoomID] = q
		go func() {
			for job := range q {
				job()
			}
		}()
	}
	r.mu.Unlock()
	q <- func() {
		time.Sleep(r.delay)
		if err := ctx.Err(); err != nil {
			done <- err
			return
		}
		r.mu.Lock()
		r.sends++
		if _, ok := r.first[env.EventID]; !ok {
			r.first[env.EventID] = time.Now()
			r.order[env.RoomID] = append(r.order[env.RoomID], env.EventID)
		}
		r.mu.Unlock()
		done <- nil
	}
	return done
}

func (r *imRecorder) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-r.Enqueue(ctx, env)
}

// MariaDB paused for 10 s under continuous load (its own mariadbd, not the
// shared one), three times: after each recovery every outbox row reaches
// IM within 10 s (rows written before or during the pause: 10 s after it
// ended; rows written later: 10 s after they were written), in room order,
// while the load goes on; and every row ends published. The room
// publishers and the relay run as on a node (production timeouts and
// leases).
func TestOutboxCatchesUpAfterDatabasePauseUnderLoad(t *testing.T) {
	srv := mysqltest.StartServer(t)
	store, sys, quiet := mysqlRooms(t, srv.DSN)
	im := newIMRecorder(20 * time.Millisecond)
	d := Deps{Store: store, Publisher: im, Gifts: FreeGifts(1), Config: configs.Default().Room, Logger: quiet}
	d.setDefaults()
	withGate(&d)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	ocfg := configs.WithDefaults(configs.OutboxWorkerConfig{}) // production defaults
	rl, err := relay.Start(sup, relay.Deps{Store: store, Publisher: im, Config: ocfg, NodeID: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Stop(10 * time.Second) })

	const rooms = 60
	pids := make([]*actor.PID, rooms)
	for i := range pids {
		dd := d
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &dd} }))
		sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: fmt.Sprintf("app/f%02d", i), Kind: Kind}})
		pids[i] = pid
		res, err := sys.Root.RequestFuture(pid, rcCreateIn(fmt.Sprintf("f%02d", i)), 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replyOf(res); err != nil {
			t.Fatal(err)
		}
	}

	// The load: 8 clients, a join of a new user each, on random rooms,
	// failures (the pause) ignored.
	var (
		stop  atomic.Bool
		acked atomic.Int64
		wg    sync.WaitGroup
	)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				i := rand.IntN(rooms)
				rc := rcJoinIn(fmt.Sprintf("f%02d", i), fmt.Sprintf("c%d-%d", c, n), fmt.Sprintf("u%d-%d", c, n))
				res, err := sys.Root.RequestFuture(pids[i], rc, 5*time.Second).Result()
				if err == nil {
					if _, err := replyOf(res); err == nil {
						acked.Add(1)
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var recoveries []time.Time
	time.Sleep(3 * time.Second)
	for range 3 {
		srv.Pause()
		time.Sleep(10 * time.Second)
		srv.Resume()
		recoveries = append(recoveries, time.Now())
		time.Sleep(12 * time.Second) // the load goes on
	}
	stop.Store(true)
	wg.Wait()

	deadline := time.Now().Add(60 * time.Second)
	var pending int
	for {
		if err := store.DB().QueryRow("SELECT COUNT(*) FROM room_outbox WHERE status = 'pending'").Scan(&pending); err == nil && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outbox rows still pending 60 s after the load stopped", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}

	rows, err := store.DB().Query("SELECT event_id, room_id, room_seq, created_at_ms FROM room_outbox ORDER BY room_id, room_seq, event_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string][]string{}
	im.mu.Lock()
	defer im.mu.Unlock()
	var late []string
	var worst time.Duration
	total := 0
	for rows.Next() {
		var (
			id, roomID string
			seq, at    int64
		)
		if err := rows.Scan(&id, &roomID, &seq, &at); err != nil {
			t.Fatal(err)
		}
		total++
		want[roomID] = append(want[roomID], id)
		sent, ok := im.first[id]
		if !ok {
			t.Fatalf("%s is published in the store but never reached IM", id)
		}
		// The bound: 10 s after the row was written, or after the end of
		// the pause it was written before or during.
		from := time.UnixMilli(at)
		for _, r := range recoveries {
			if from.Before(r) && from.After(r.Add(-11*time.Second)) {
				from = r
			}
		}
		if lag := sent.Sub(from); lag > worst {
			worst = lag
		}
		if sent.Sub(from) > 10*time.Second {
			late = append(late, fmt.Sprintf("%s %v", id, sent.Sub(from).Round(time.Millisecond)))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commands acknowledged, %d outbox rows, %d sends (%d repeats), worst lag after write or recovery %v",
		acked.Load(), total, im.sends, im.sends-len(im.first), worst.Round(time.Millisecond))
	if len(late) > 0 {
		t.Fatalf("%d of %d rows reached IM more than 10 s after they were written or the database came back: %v", len(late), total, late[:min(20, len(late))])
	}
	for roomID, ids := range want {
		if got := im.order[roomID]; !slices.Equal(got, ids) {
			t.Fatalf("room %s reached IM in the order %v, want room order %v", roomID, got, ids)
		}
	}
	if acked.Load() < 100 {
		t.Fatalf("only %d commands acknowledged: the load did not run", acked.Load())
	}
}

func rcCreateIn(roomID string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "create-" + roomID, AppCode: "app", RoomId: roomID, UserId: "owner", Name: "Room " + roomID}}}
}

func rcJoinIn(roomID, cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}
