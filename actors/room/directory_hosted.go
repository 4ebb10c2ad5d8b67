package room

import (
	"cmp"
	"slices"
	"sync"

	"github.com/hyapp/roomcell/persistence"
)

// Hosted is the node-local registry of active room grains: a grain adds
// itself on activation and removes itself when it stops. The presence stale
// worker scans exactly these rooms.
type Hosted struct{ m sync.Map }

// NewHosted returns an empty registry.
func NewHosted() *Hosted { return &Hosted{} }

// Add registers a room (grains call it on activation; tests may too).
func (h *Hosted) Add(k persistence.RoomKey) { h.m.Store(k, struct{}{}) }

// Remove unregisters a room.
func (h *Hosted) Remove(k persistence.RoomKey) { h.m.Delete(k) }

// Rooms returns the rooms active on this node, sorted.
func (h *Hosted) Rooms() []persistence.RoomKey {
	var out []persistence.RoomKey
	h.m.Range(func(k, _ any) bool {
		out = append(out, k.(persistence.RoomKey))
		return true
	})
	slices.SortFunc(out, func(a, b persistence.RoomKey) int {
		return cmp.Or(cmp.Compare(a.AppCode, b.AppCode), cmp.Compare(a.RoomID, b.RoomID))
	})
	return out
}
