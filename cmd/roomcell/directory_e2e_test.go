package main

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// The directory as a client sees it in dev mode: joining a second room
// moves the user out of the first (RoomUserLeft switched_room), the user's
// current room is known, and rooms rank by heat.
func TestEndToEndDirectory(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	wc := walletClient(t, app)
	for _, r := range []string{"hot", "cold"} {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c-" + r, AppCode: "d", RoomId: r, UserId: "owner-" + r, Name: r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wc.Credit(ctx, &v1.WalletCreditRequest{CommandId: "t", AppCode: "d", UserId: "owner-hot", AssetType: "COIN", Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j1", AppCode: "d", RoomId: "cold", UserId: "zoe"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j2", AppCode: "d", RoomId: "hot", UserId: "zoe"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "g1", AppCode: "d", RoomId: "hot", UserId: "owner-hot", ToUserId: "zoe", GiftId: "heart", GiftCount: 2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "zoe moved out of the cold room", func() bool {
		r, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: "d", RoomId: "cold"})
		return err == nil && len(r.Room.Members) == 1
	})
	waitUntil(t, 5*time.Second, "directory says zoe is in the hot room", func() bool {
		u, err := rc.GetUserRoom(ctx, &v1.GetUserRoomRequest{AppCode: "d", UserId: "zoe"})
		return err == nil && u.RoomId == "hot"
	})
	waitUntil(t, 5*time.Second, "hot ranks first", func() bool {
		l, err := rc.ListRooms(ctx, &v1.ListRoomsRequest{AppCode: "d"})
		return err == nil && len(l.Rooms) == 2 && l.Rooms[0].RoomId == "hot"
	})
	_, err := rc.GetUserRoom(ctx, &v1.GetUserRoomRequest{AppCode: "d", UserId: "nobody"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("user in no room: %v, want NotFound", err)
	}
	rows, _ := app.store.ListOutbox(ctx, outboxAll())
	var switched bool
	for _, r := range rows {
		if r.Envelope.EventType == "RoomUserLeft" && r.Envelope.RoomID == "cold" && string(r.Envelope.Payload) == `{"user_id":"zoe","reason":"switched_room"}` {
			switched = true
		}
	}
	if !switched {
		t.Fatal("no RoomUserLeft(switched_room) for zoe in the cold room's outbox")
	}
}
