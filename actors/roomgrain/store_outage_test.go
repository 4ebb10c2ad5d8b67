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

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

func rcGetIn(roomID string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: roomID}}}
}

// outageCall is one request of the store-outage test.
type outageCall struct {
	at    time.Time
	took  time.Duration
	err   error
	seq   int64 // a read's answer
	floor int64 // the room's highest acknowledged seq when the read was sent
}

// MariaDB (a private mariadbd; the shared one is never paused) is
// SIGSTOPped for 10 s under continuous writes and reads of 30 rooms.
// While it is paused every GetRoom is answered, from the room's last
// committed state, with the seq that state reflects, never older than a
// write acknowledged before the read was sent; writes are refused
// (Unavailable) at once once the node has seen the store stall, instead
// of each holding its room (and the reads behind it) for the store
// timeout. After the pause writes land again and every acknowledged
// write is in the log once, at its acknowledged seq.
func TestGetRoomAnswersDuringStorePause(t *testing.T) {
	srv := mysqltest.StartServer(t)
	store, sys, quiet := mysqlRooms(t, srv.DSN)
	d := Deps{Store: store, Publisher: newIMRecorder(time.Millisecond), Gifts: FreeGifts(1), Config: configs.Default().Room, Logger: quiet}
	d.setDefaults()
	withGate(&d)

	const rooms = 30
	pids := make([]*actor.PID, rooms)
	acked := make([]atomic.Int64, rooms)
	for i := range pids {
		dd := d
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &dd} }))
		sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: fmt.Sprintf("app/o%02d", i), Kind: Kind}})
		pids[i] = pid
		res, err := sys.Root.RequestFuture(pid, rcCreateIn(fmt.Sprintf("o%02d", i)), 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		r, err := replyOf(res)
		if err != nil {
			t.Fatal(err)
		}
		acked[i].Store(r.RoomSeq)
	}

	var (
		stop         atomic.Bool
		wg           sync.WaitGroup
		mu           sync.Mutex
		reads, write []outageCall
		ackedIDs     = map[string]int64{} // command id -> acknowledged seq
		ackedRoom    = map[string]int{}
	)
	for c := range 6 {
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				i := rand.IntN(rooms)
				id := fmt.Sprintf("c%d-%d", c, n)
				start := time.Now()
				res, err := sys.Root.RequestFuture(pids[i], rcJoinIn(fmt.Sprintf("o%02d", i), id, "u"+id), 5*time.Second).Result()
				var r *v1.CommandReply
				if err == nil {
					r, err = replyOf(res)
				}
				call := outageCall{at: start, took: time.Since(start), err: err}
				mu.Lock()
				write = append(write, call)
				if err == nil {
					ackedIDs[id], ackedRoom[id] = r.RoomSeq, i
				}
				mu.Unlock()
				if err == nil {
					for cur := acked[i].Load(); r.RoomSeq > cur && !acked[i].CompareAndSwap(cur, r.RoomSeq); cur = acked[i].Load() {
					}
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			for !stop.Load() {
				i := rand.IntN(rooms)
				floor := acked[i].Load()
				start := time.Now()
				res, err := sys.Root.RequestFuture(pids[i], rcGetIn(fmt.Sprintf("o%02d", i)), 5*time.Second).Result()
				var r *v1.CommandReply
				if err == nil {
					r, err = replyOf(res)
				}
				call := outageCall{at: start, took: time.Since(start), err: err, floor: floor}
				if err == nil {
					call.seq = r.RoomSeq
				}
				mu.Lock()
				reads = append(reads, call)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(3 * time.Second)
	srv.Pause()
	paused := time.Now()
	time.Sleep(10 * time.Second)
	srv.Resume()
	resumed := time.Now()
	time.Sleep(5 * time.Second)
	stop.Store(true)
	wg.Wait()

	// Reads sent during the pause: every one answered, none stale.
	var during, stale, failed int
	var lat []time.Duration
	for _, c := range reads {
		if c.at.Before(paused) || !c.at.Before(resumed) {
			continue
		}
		during++
		lat = append(lat, c.took)
		switch {
		case c.err != nil:
			failed++
			if failed <= 5 {
				t.Errorf("GetRoom %s into the pause failed after %s: %v", c.at.Sub(paused).Round(time.Millisecond), c.took.Round(time.Millisecond), c.err)
			}
		case c.seq < c.floor:
			stale++
			t.Errorf("GetRoom %s into the pause answered seq %d, below the acknowledged %d", c.at.Sub(paused).Round(time.Millisecond), c.seq, c.floor)
		}
	}
	if during < 100 || failed != 0 {
		t.Errorf("GetRoom during the pause: %d sent, %d failed; want many, all answered", during, failed)
	}
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }

	// Writes: once the store stalled (a second at most), refused at once.
	var wDuring, wAcked, wRefused, wSlow int
	var wMax time.Duration
	firstAckAfter := time.Duration(-1)
	for _, c := range write {
		switch {
		case !c.at.Before(paused.Add(2*time.Second)) && c.at.Before(resumed):
			wDuring++
			wMax = max(wMax, c.took)
			if c.err == nil {
				wAcked++
			} else if errclass.Name(c.err) == "unavailable" {
				wRefused++
			}
			if c.took > 250*time.Millisecond {
				wSlow++
			}
		case !c.at.Before(resumed) && c.err == nil:
			if d := c.at.Add(c.took).Sub(resumed); firstAckAfter < 0 || d < firstAckAfter {
				firstAckAfter = d
			}
		}
	}
	if wDuring == 0 || wRefused != wDuring || wSlow != 0 {
		t.Errorf("writes sent 2 s into the pause or later: %d, %d refused unavailable, %d acknowledged, %d took over 250 ms (slowest %s); want all refused at once",
			wDuring, wRefused, wAcked, wSlow, wMax)
	}
	if firstAckAfter < 0 {
		t.Errorf("no write was acknowledged after the pause")
	}

	// Every acknowledged write is in the log once, at its seq.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for id, seq := range ackedIDs {
		rec, err := store.FindCommand(ctx, persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("o%02d", ackedRoom[id])}, id)
		if err != nil || rec.Seq != seq {
			t.Fatalf("acknowledged %s at seq %d: in the log as %+v, %v", id, seq, rec.Seq, err)
		}
	}
	t.Logf("during the 10 s pause: %d GetRoom sent, %d answered, %d stale; latency p50 %s p99 %s max %s; writes sent ≥ 2 s into it: %d, all refused, slowest %s; first write acknowledged %s after the resume; %d writes acknowledged in all, each in the log at its seq",
		during, during-failed, stale, pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond),
		wDuring, wMax.Round(time.Microsecond), firstAckAfter.Round(time.Millisecond), len(ackedIDs))
}
