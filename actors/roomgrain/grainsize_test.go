package roomgrain

import (
	"testing"
	"unsafe"

	"github.com/hyapp/roomcell/persistence"
)

// A grain is 384 bytes at most and its publisher link 224: size classes
// of Go's allocator, which every active room pays (the heap per room). A
// new field belongs in a part made on first use, as the publisher link
// and the observers are.
func TestGrainFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(grain{}); n > 384 {
		t.Errorf("grain is %d bytes, over the 384-byte size class", n)
	}
	if n := unsafe.Sizeof(pubLink{}); n > 224 {
		t.Errorf("pubLink is %d bytes, over the 224-byte size class", n)
	}
}

// key reads the room's key back from its identity, whatever the room id
// holds after the first '/'.
func TestGrainKeyIsItsIdentity(t *testing.T) {
	for identity, want := range map[string]persistence.RoomKey{
		"app/r1":    {AppCode: "app", RoomID: "r1"},
		"app/r/1":   {AppCode: "app", RoomID: "r/1"},
		"a/":        {AppCode: "a"},
		"lalu/9999": {AppCode: "lalu", RoomID: "9999"},
	} {
		g := &grain{identity: identity}
		if got := g.key(); got != want {
			t.Errorf("key of %q = %+v, want %+v", identity, got, want)
		}
	}
}
