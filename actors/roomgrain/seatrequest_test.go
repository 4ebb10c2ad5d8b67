package roomgrain

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomgrain/roomcheck"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// wrap puts a request into the grain protocol's oneof.
func wrap(m proto.Message) *v1.RoomCommand { return roomcheck.Wrap(m) }

// A reserved command id is refused from clients: a client spending the
// room's next expiry id would block its expiry.
func TestSeatExpireIDIsReserved(t *testing.T) {
	err := room.CheckClientCommand(rcJoin(room.SeatExpireIDPrefix+"3", "alice"))
	if !errors.Is(err, errclass.Invalid) {
		t.Fatalf("client command with %s id: %v", room.SeatExpireIDPrefix, err)
	}
}
