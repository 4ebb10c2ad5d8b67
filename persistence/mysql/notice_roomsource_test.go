package mysql

import (
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

// A room store reads its own room_outbox for the notice workers (a room
// database on another server than the notice store's), by the same
// contract as the notice store's reader.
func TestRoomStoreRoomOutboxAfterMariaDB(t *testing.T) {
	storetest.RunRoomOutboxAfter(t, func(t *testing.T) (persistence.Store, storetest.RoomOutboxAfterFunc) {
		room := newTestStore(t, nil)
		return room, room.RoomOutbox().RoomOutboxAfter
	})
}
