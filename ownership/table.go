package ownership

import (
	"slices"
	"sync"
)

// Table is a node's view of shard ownership.
type Table interface {
	// Shards is the number of shards.
	Shards() int
	// Hold reports whether this node may serve the room now, and under
	// which epoch (0: not fenced). It is false once the lease that covers
	// the room can no longer be trusted to be this node's.
	Hold(identity string) (epoch int64, ok bool)
	// Owner is the address of the node that owns the room's shard now,
	// "" while nobody does (a handover in progress).
	Owner(identity string) string
	// Changed is closed at the next change of any shard's owner.
	Changed() <-chan struct{}
	// Start begins serving as the node at address self (known only once
	// the remote listens). onLost is called, outside any lock, with the
	// shards this node stopped owning, so their grains can be stopped.
	Start(self string, onLost func(shards []int)) error
	// Close releases everything this node owns and stops.
	Close()
}

// signal is a broadcast: wait returns a channel closed at the next fire.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// View places shards by the member view alone (Assign over the members'
// addresses): for the single-node mode, where this node owns every shard,
// and for clusters without a coordinator (automanaged). It has no lease
// and its epoch is 0, so it gives no single-activation guarantee while
// views differ; the store's seq fence is then the only line.
type View struct {
	shards int
	mu     sync.RWMutex
	self   string
	owners []string
	onLost func([]int)
	sig    signal
}

// NewView returns a View table of shards shards (DefaultShards if <= 0).
func NewView(shards int) *View {
	if shards <= 0 {
		shards = DefaultShards
	}
	return &View{shards: shards}
}

func (v *View) Shards() int { return v.shards }

func (v *View) Start(self string, onLost func([]int)) error {
	v.mu.Lock()
	v.self, v.onLost = self, onLost
	v.mu.Unlock()
	v.SetMembers([]string{self})
	return nil
}

// SetMembers recomputes the owners from the member addresses.
func (v *View) SetMembers(addrs []string) {
	next := Assign(addrs, v.shards)
	v.mu.Lock()
	var lost []int
	for s, o := range v.owners {
		if o == v.self && (next == nil || next[s] != v.self) {
			lost = append(lost, s)
		}
	}
	changed := !slices.Equal(v.owners, next)
	v.owners = next
	onLost := v.onLost
	v.mu.Unlock()
	if len(lost) > 0 && onLost != nil {
		onLost(lost)
	}
	if changed {
		v.sig.fire()
	}
}

func (v *View) Owner(identity string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.owners == nil {
		return ""
	}
	return v.owners[ShardOf(identity, v.shards)]
}

func (v *View) Hold(identity string) (int64, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return 0, v.self != "" && v.owners != nil && v.owners[ShardOf(identity, v.shards)] == v.self
}

func (v *View) Changed() <-chan struct{} { return v.sig.wait() }
func (v *View) Close()                   {}
