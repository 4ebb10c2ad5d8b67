package roomim_test

import (
	"testing"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/room"
)

// TestReopenMakesTheGroupAgain: a room closed on another node (whose
// publisher destroyed the group) and reopened here gets its group back,
// though this node's publisher had seen it created; a plain RoomCreated
// of a known group makes no call.
func TestReopenMakesTheGroupAgain(t *testing.T) {
	ctx := ctxT(t)
	a := setup(t, nil)
	other, err := tencentim.New(a.fake.ClientConfig(), tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	b := roomim.New(other, roomim.WithLogger(quiet))
	t.Cleanup(b.Close)
	gid := roomim.GroupID("lalu", "again")
	created := room.RoomCreated{OwnerUserID: "host", Name: "again", MicSeats: 8}
	if err := a.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "again", 1, created)); err != nil {
		t.Fatal(err)
	}
	if err := a.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "again", 1, created)); err != nil {
		t.Fatal(err)
	}
	if n := a.fake.CallCount(tencentim.APICreateGroup); n != 1 {
		t.Fatalf("%d create_group calls for a group this publisher made, want 1", n)
	}
	if err := b.PublishRoomEvent(ctx, envelope(t, "lalu", "again", 2, room.RoomClosed{OperatorUserID: "host"})); err != nil {
		t.Fatal(err)
	}
	if err := a.fake.EnterGroup(gid, "fan"); err != imfake.ErrNoGroup {
		t.Fatalf("enter a destroyed group: %v, want ErrNoGroup", err)
	}
	reopened := created
	reopened.Reopened = true
	if err := a.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "again", 3, reopened)); err != nil {
		t.Fatal(err)
	}
	if err := a.fake.EnterGroup(gid, "fan"); err != nil {
		t.Fatalf("enter the reopened room's group: %v", err)
	}
}
