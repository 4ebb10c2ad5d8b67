package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/hyapp/roomcell/actors/presence"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// A client cannot take the command_id of a command its room's workers
// will send. The presence worker's leave of a quiet member has an id
// derived from the member's last heartbeat; a member who guessed it (here:
// read it, as a client that tries every millisecond around its last
// heartbeat would) and spent it on a seat made the worker's leave "a
// different command under the same id", refused on every scan: the member
// stayed in the room, on the mic, for ever without heartbeating.
func TestClientCannotSpendTheStaleWorkersCommandID(t *testing.T) {
	app, rc := startDev(t, func(c *configs.Config) {
		c.Presence.StaleAfter, c.Presence.ScanInterval = time.Second, 200*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const a, r = "app", "quiet"
	key := persistence.RoomKey{AppCode: a, RoomID: r}
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Heartbeat(ctx, &v1.HeartbeatRequest{AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	seen, err := app.directory.StalePresence(ctx, key, time.Now().Add(time.Hour).UnixMilli(), 10)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(seen, func(p persistence.Presence) bool { return p.UserID == "bob" })
	if i < 0 {
		t.Fatalf("bob has no presence: %v", seen)
	}
	stolen := presence.LeaveCommandID(key, "bob", seen[i].LastSeenMs)
	_, err = rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: stolen, AppCode: a, RoomId: r, UserId: "bob", Seat: 0})
	wantCode(t, err, codes.InvalidArgument, "TakeMic under the stale worker's command_id")

	// Alice keeps heartbeating; bob goes quiet and is taken out.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := rc.Heartbeat(ctx, &v1.HeartbeatRequest{AppCode: a, RoomId: r, UserId: "alice"}); err != nil {
			t.Fatal(err)
		}
		got, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got.GetRoom().GetMembers(), "bob") {
			if !slices.Contains(got.GetRoom().GetMembers(), "alice") {
				t.Fatal("the heartbeating owner was taken out too")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob still in the room 15 s after his last heartbeat (stale_after 1 s): %v", got.GetRoom())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A SendGift's command_id is the wallet's key for its charge, and the
// wallet keys by app: the same id in a second room of the app is refused
// (AlreadyExists), charges nothing more and writes nothing there, while
// any other command's id is the room's alone (docs/wallet.md).
func TestGiftCommandIDIsUniquePerApp(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	wc := walletClient(t, app)
	if _, err := wc.Credit(ctx, &v1.WalletCreditRequest{CommandId: "top", AppCode: "a", UserId: "alice", AssetType: "COIN", Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"A", "B"} {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "a", RoomId: r, UserId: "owner" + r, Name: "n"}); err != nil {
			t.Fatalf("create %s under an id room A used too: %v", r, err)
		}
	}
	gift := func(r string) error {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j1", AppCode: "a", RoomId: r, UserId: "alice"}); err != nil {
			t.Fatalf("join %s: %v", r, err)
		}
		_, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "g1", AppCode: "a", RoomId: r, UserId: "alice", ToUserId: "owner" + r, GiftId: "rose", GiftCount: 1})
		return err
	}
	if err := gift("A"); err != nil {
		t.Fatal(err)
	}
	bBefore, err := app.store.LoadCommands(ctx, persistence.RoomKey{AppCode: "a", RoomID: "B"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, gift("B"), codes.AlreadyExists, "the same gift command_id in room B")
	bAfter, err := app.store.LoadCommands(ctx, persistence.RoomKey{AppCode: "a", RoomID: "B"}, 0)
	if err != nil || len(bAfter) != len(bBefore)+1 || bAfter[len(bAfter)-1].CommandType != "JoinRoom" {
		t.Fatalf("room B's log after the refused gift: %d rows (was %d, plus the join), %v", len(bAfter), len(bBefore), err)
	}
	b, err := wc.GetBalances(ctx, &v1.WalletGetBalancesRequest{AppCode: "a", UserId: "alice"})
	if err != nil || coin(b) != 990 {
		t.Fatalf("alice after one rose and one refused: %v %v, want 990 COIN", b, err)
	}
}
