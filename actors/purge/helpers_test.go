package purge

import (
	"errors"
	"testing"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/persistence"
)

func isNotFound(err error) bool { return errors.Is(err, persistence.ErrNotFound) }

// The stores hold kicks back for the room notice cursor by this type name;
// storage may not import the room package, so the two are held equal here.
func TestKickTypeMatchesRoom(t *testing.T) {
	if persistence.RoomUserKickedType != room.TypeRoomUserKicked {
		t.Fatalf("persistence.RoomUserKickedType %q != room.TypeRoomUserKicked %q", persistence.RoomUserKickedType, room.TypeRoomUserKicked)
	}
}
