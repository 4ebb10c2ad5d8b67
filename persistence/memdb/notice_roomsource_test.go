package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestRoomOutboxAfter(t *testing.T) {
	storetest.RunRoomOutboxAfter(t, func(t *testing.T) (persistence.Store, storetest.RoomOutboxAfterFunc) {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s, s.RoomOutboxAfter
	})
}
