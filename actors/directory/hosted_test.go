package directory

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/persistence"
)

// sends counts the wheel's refreshes per PID and keeps their times.
type sends struct {
	mu  sync.Mutex
	per map[*actor.PID]int
	at  []time.Time
}

func newSends() *sends { return &sends{per: map[*actor.PID]int{}} }

func (s *sends) send(pid *actor.PID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.per[pid]++
	s.at = append(s.at, time.Now())
}

// busiest is the most sends that fell in one window of length w, with the
// windows laid from the first send on.
func (s *sends) busiest(w time.Duration) int {
	counts := map[int64]int{}
	most := 0
	for _, at := range s.at {
		i := int64(at.Sub(s.at[0]) / w)
		counts[i]++
		most = max(most, counts[i])
	}
	return most
}

func randomKey(i int) persistence.RoomKey {
	return persistence.RoomKey{AppCode: fmt.Sprintf("app%d", rand.IntN(3)), RoomID: fmt.Sprintf("r-%d-%x", i, rand.Uint64())}
}

// Every room is refreshed once per interval, and the refreshes are spread
// over it: across the interval's ticks, and within a tick too (sent at
// once, a tick's rooms each started a dispatcher goroutine).
func TestHostedRefreshesEachRoomOncePerIntervalSpread(t *testing.T) {
	const rooms, interval = 3200, 640 * time.Millisecond
	h := NewHosted()
	s := newSends()
	pids := make([]*actor.PID, rooms)
	start := time.Now()
	for i := range pids {
		pids[i] = actor.NewPID("local", fmt.Sprint("room", i))
		h.add(randomKey(i), pids[i], s.send, interval)
	}
	// Three rounds' worth of refreshes, however long a loaded machine takes
	// for them (make test under -race once made one round in 3.5 intervals:
	// the wheel drops the ticks its paced sends overrun).
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.at)
		s.mu.Unlock()
		if n >= 3*rooms {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refreshes of %d rooms in 30 s, want 3 rounds", n, rooms)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	elapsed := s.at[len(s.at)-1].Sub(start)
	// Once per round: the counts differ by two at most, the first round
	// (which missed the rooms added after their shard's tick) and the one
	// under way. And once per interval at most: never more rounds than
	// intervals begun.
	least, most := len(s.at), 0
	for _, pid := range pids {
		least, most = min(least, s.per[pid]), max(most, s.per[pid])
	}
	if most-least > 2 || least < 2 {
		t.Fatalf("refreshes per room from %d to %d after %d sends, want within two and at least 2", least, most, len(s.at))
	}
	if limit := int(elapsed/interval) + 1; most > limit {
		t.Fatalf("a room refreshed %d times in %s, want at most %d (once per %s)", most, elapsed, limit, interval)
	}
	// Evenly spread, a window of 1/8 interval holds 400 sends and one of
	// 1/256 (2.5 ms) 12.5; bursts of whole rounds or whole ticks put 3,200
	// or 100 in one.
	for _, c := range []struct {
		w    time.Duration
		most int
	}{{interval / 8, 2 * rooms / 8}, {interval / 256, 4 * rooms / 256}} {
		if n := s.busiest(c.w); n > c.most {
			t.Fatalf("%d refreshes within %s, want at most %d: not spread", n, c.w, c.most)
		}
	}
}

// An activation that stops after its room came back on this node does
// not take the new activation's entry or its refresh.
func TestHostedStaleRemoveKeepsTheNewActivation(t *testing.T) {
	h := NewHosted()
	s := newSends()
	k := persistence.RoomKey{AppCode: "a", RoomID: "r"}
	old, cur := actor.NewPID("local", "old"), actor.NewPID("local", "new")
	h.add(k, old, s.send, 64*time.Millisecond)
	h.add(k, cur, s.send, 64*time.Millisecond)
	h.remove(k, old)
	if got := h.Rooms(); len(got) != 1 || got[0] != k {
		t.Fatalf("rooms after the old activation's remove: %v, want [%v]", got, k)
	}
	// Two refreshes of the new activation, however long a loaded machine
	// takes (200 ms once gave one under make test).
	var nOld, nCur int
	for deadline := time.Now().Add(10 * time.Second); nCur < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		nOld, nCur = s.per[old], s.per[cur]
		s.mu.Unlock()
	}
	if nOld != 0 || nCur < 2 {
		t.Fatalf("refreshes: old activation %d, new %d; want 0 and at least 2", nOld, nCur)
	}
	h.remove(k, cur)
	if got := h.Rooms(); len(got) != 0 {
		t.Fatalf("rooms after the last remove: %v", got)
	}
}

// Rooms coming and going from many goroutines leave the registry exact,
// the wheel ends once it is empty, and the next room starts it again.
func TestHostedConcurrentAddRemoveAndWheelRestart(t *testing.T) {
	h := NewHosted()
	s := newSends()
	const workers, each = 16, 300
	var wg sync.WaitGroup
	kept := make([][]persistence.RoomKey, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := randomKey(w*each + i)
				pid := actor.NewPID("local", k.RoomID)
				h.add(k, pid, s.send, 32*time.Millisecond)
				if i%3 == 0 {
					kept[w] = append(kept[w], k)
					continue
				}
				h.remove(k, pid)
			}
		}()
	}
	wg.Wait()
	want := 0
	for _, ks := range kept {
		want += len(ks)
	}
	if got := len(h.Rooms()); got != want {
		t.Fatalf("%d rooms registered, want %d", got, want)
	}
	if n := int(h.n.Load()); n != want {
		t.Fatalf("count %d, want %d", h.n.Load(), want)
	}
	for _, ks := range kept {
		for _, k := range ks {
			h.Remove(k)
		}
	}
	waitFor(t, func() bool { // the wheel ends once empty
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.running
	})
	pid := actor.NewPID("local", "again")
	h.add(persistence.RoomKey{AppCode: "a", RoomID: "again"}, pid, s.send, 32*time.Millisecond)
	waitFor(t, func() bool { // a refresh after the wheel restarted
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.per[pid] > 0
	})
}
