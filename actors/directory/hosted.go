package directory

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/persistence"
)

// hostedShards splits the registry's lock and the refresh round: each
// wheel tick refreshes one shard, so a node's rooms re-register spread
// evenly over the refresh interval.
const hostedShards = 32

// Hosted is the node-local registry of active room grains: a grain adds
// itself on activation and removes itself when it stops. The presence stale
// worker scans exactly these rooms.
//
// It also drives the rooms' directory refresh: one wheel per node sends each
// room its refresh once per interval, at a phase set by the room's hash. A
// timer per room cost ~400 bytes each, and after an activation burst their
// ticks came together, every room's directory write in the same instant.
type Hosted struct {
	shards [hostedShards]hostedShard
	n      atomic.Int64 // rooms registered

	mu      sync.Mutex // guards running: starting and ending the wheel
	running bool       // a wheel goroutine runs
}

type hostedShard struct {
	mu    sync.Mutex
	rooms map[persistence.RoomKey]*actor.PID // nil PID: listed, not refreshed
}

// NewHosted returns an empty registry.
func NewHosted() *Hosted { return &Hosted{} }

func (h *Hosted) shard(k persistence.RoomKey) *hostedShard {
	// FNV-1a, inline: no allocation per lookup.
	x := uint32(2166136261)
	for _, s := range [2]string{k.AppCode, k.RoomID} {
		for i := 0; i < len(s); i++ {
			x = (x ^ uint32(s[i])) * 16777619
		}
		x = (x ^ '/') * 16777619
	}
	return &h.shards[x%hostedShards]
}

// Add registers a room without a grain to refresh (tests of the presence
// worker use it).
func (h *Hosted) Add(k persistence.RoomKey) { h.add(k, nil, nil, 0) }

// add registers a room; with a pid, the wheel (started on the first such
// room, with send and interval) refreshes it.
func (h *Hosted) add(k persistence.RoomKey, pid *actor.PID, send func(*actor.PID), interval time.Duration) {
	s := h.shard(k)
	s.mu.Lock()
	if s.rooms == nil {
		s.rooms = map[persistence.RoomKey]*actor.PID{}
	}
	_, had := s.rooms[k]
	s.rooms[k] = pid
	s.mu.Unlock()
	if !had {
		// Counted before the wheel is looked at: a wheel ending on an
		// empty registry does so under mu, so this add either sees it
		// gone and starts one, or keeps it from ending.
		h.n.Add(1)
	}
	if pid == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		h.running = true
		go h.wheel(send, interval)
	}
}

// Remove unregisters a room.
func (h *Hosted) Remove(k persistence.RoomKey) { h.remove(k, nil) }

// remove unregisters a room if pid is nil or still the one registered: an
// activation that stops after its room came back on this node must not
// take the new one's entry.
func (h *Hosted) remove(k persistence.RoomKey, pid *actor.PID) {
	s := h.shard(k)
	s.mu.Lock()
	cur, ok := s.rooms[k]
	ok = ok && (pid == nil || cur == pid)
	if ok {
		delete(s.rooms, k)
	}
	s.mu.Unlock()
	if ok {
		h.n.Add(-1)
	}
}

// Rooms returns the rooms active on this node, sorted.
func (h *Hosted) Rooms() []persistence.RoomKey {
	// Sized once: grown by appends, a scan of 100k rooms left ~4 MB of
	// dropped arrays behind each time.
	out := make([]persistence.RoomKey, 0, max(h.n.Load(), 0))
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for k := range s.rooms {
			out = append(out, k)
		}
		s.mu.Unlock()
	}
	// Sorted on each presence scan (every 5 s, all the node's rooms): the
	// room id is compared only when the app codes tie.
	slices.SortFunc(out, func(a, b persistence.RoomKey) int {
		if c := strings.Compare(a.AppCode, b.AppCode); c != 0 {
			return c
		}
		return strings.Compare(a.RoomID, b.RoomID)
	})
	return out
}

// wheel refreshes one shard per tick, interval/hostedShards apart, until
// the registry is empty (the next room to come starts a new one), so a
// node, or a test, whose rooms all stopped keeps no goroutine.
func (h *Hosted) wheel(send func(*actor.PID), interval time.Duration) {
	tick := max(interval/hostedShards, time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var pids []*actor.PID
	for i := 0; ; i = (i + 1) % hostedShards {
		<-t.C
		s := &h.shards[i]
		s.mu.Lock()
		pids = pids[:0]
		for _, pid := range s.rooms {
			if pid != nil {
				pids = append(pids, pid)
			}
		}
		s.mu.Unlock()
		pace(pids, tick, send)
		clear(pids) // no stopped grain's PID kept alive until the next turn
		h.mu.Lock()
		if h.n.Load() == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// refreshGroup is how many refreshes the wheel sends back to back.
const refreshGroup = 8

// pace sends a shard's refreshes in groups spread over most of a tick. A
// shard of a 100k-room node holds ~3,000 rooms: sent at once, each room's
// turn started a goroutine of the room dispatcher (none was idle), and
// ~700 of them stayed alive between ticks.
func pace(pids []*actor.PID, tick time.Duration, send func(*actor.PID)) {
	groups := (len(pids) + refreshGroup - 1) / refreshGroup
	gap := tick * 4 / 5 / time.Duration(max(groups, 1))
	for i := 0; i < len(pids); i += refreshGroup {
		if i > 0 && gap >= 50*time.Microsecond {
			time.Sleep(gap)
		}
		for _, pid := range pids[i:min(i+refreshGroup, len(pids))] {
			send(pid)
		}
	}
}
