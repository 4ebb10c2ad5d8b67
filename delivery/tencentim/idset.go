package tencentim

import "sync"

// IDSet remembers up to max ids, forgetting the oldest first: which IM
// accounts were imported, which groups are known to exist. Safe for
// concurrent use.
type IDSet struct {
	mu   sync.Mutex
	max  int
	set  map[string]struct{}
	ring []string
	next int
}

// NewIDSet returns a set that holds at most max ids.
func NewIDSet(max int) *IDSet {
	if max < 1 {
		max = 1
	}
	return &IDSet{max: max, set: make(map[string]struct{})}
}

// Has reports whether id is remembered.
func (s *IDSet) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[id]
	return ok
}

// Add remembers id, forgetting the oldest id when full.
func (s *IDSet) Add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[id]; ok {
		return
	}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, id)
	} else {
		delete(s.set, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % s.max
	}
	s.set[id] = struct{}{}
}

// Remove forgets id.
func (s *IDSet) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, id) // its ring slot is reused in turn; harmless
}
