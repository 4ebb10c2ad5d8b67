package main

import (
	"encoding/json"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
)

func withNotices(c *configs.Config) {
	c.Roles = append(c.Roles, configs.RoleNotice)
	c.Notice.WalletNoticeWorker.Enabled = true
	c.Notice.RoomNoticeWorker.Enabled = true
	c.Notice.WalletNoticeWorker.PollInterval = 50 * time.Millisecond
	c.Notice.RoomNoticeWorker.PollInterval = 50 * time.Millisecond
}

// Seed 003 end to end in one dev process: a kick over gRPC reaches the
// kicked user as one C2C room_notice and the room group as its message,
// with the same event_id; a credit reaches the user as a wallet_notice
// with the seed's payload.
func TestEndToEndNotices(t *testing.T) {
	app, rc := startDev(t, withNotices)
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	k, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "c3", AppCode: "lalu", RoomId: "r1", UserId: "owner", TargetUserId: "bob", Reason: "spam"})
	if err != nil {
		t.Fatal(err)
	}
	kickID := k.EventIds[len(k.EventIds)-1]
	fake := app.fakeIM
	waitUntil(t, 10*time.Second, "bob's room_notice", func() bool { return len(fake.C2CMessages("bob")) > 0 })
	waitUntil(t, 10*time.Second, "the room's kick message", func() bool { return fake.EventIDCounts()[kickID] >= 2 })
	var roomNotices int
	for _, m := range fake.C2CMessages("bob") {
		if m.Ext == "room_notice" {
			roomNotices++
			var p map[string]any
			if err := json.Unmarshal([]byte(m.Data), &p); err != nil || p["event_id"] != kickID || p["target_user_id"] != "bob" {
				t.Fatalf("room_notice payload %s (%v)", m.Data, err)
			}
		}
	}
	if roomNotices != 1 {
		t.Fatalf("bob got %d room_notice messages, want 1", roomNotices)
	}
	if c := fake.C2CMessages("owner"); len(c) != 0 {
		t.Fatalf("the operator got private notices: %+v", c)
	}

	wc := walletClient(t, app)
	if _, err := wc.Credit(ctx, &v1.WalletCreditRequest{CommandId: "topup", AppCode: "lalu", UserId: "carol", AssetType: "COIN", Amount: 500}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "carol's wallet_notice", func() bool { return len(fake.C2CMessages("carol")) > 0 })
	m := fake.C2CMessages("carol")[0]
	var p map[string]any
	if err := json.Unmarshal([]byte(m.Data), &p); err != nil {
		t.Fatal(err)
	}
	want := []string{"event_type", "event_id", "app_code", "transaction_id", "command_id", "user_id", "asset_type",
		"available_delta", "frozen_delta", "available_after", "frozen_after", "balance_version", "created_at_ms",
		"source_created_at_ms", "metadata"}
	for _, k := range want {
		if _, ok := p[k]; !ok {
			t.Fatalf("wallet_notice payload lacks %s: %s", k, m.Data)
		}
	}
	if m.Ext != "wallet_notice" || p["available_after"] != float64(500) || p["balance_version"] != float64(1) || len(p) != len(want) {
		t.Fatalf("wallet_notice %s ext %q", m.Data, m.Ext)
	}
}
