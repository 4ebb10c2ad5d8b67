package main

import (
	"errors"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
)

// TestChatDisabledEnforcedAtIM: through a dev process and the fake IM
// asking the IM callback as Tencent does, a member's message is refused
// while the room's chat is disabled for all and goes out once it is
// enabled again; the owner and an admin speak throughout.
func TestChatDisabledEnforcedAtIM(t *testing.T) {
	const token = "e2e-chat-token"
	app, rc := startDev(t, func(c *configs.Config) {
		c.TencentIM.Callback.Enabled, c.TencentIM.Callback.Token = true, token
	})
	ctx := ctxT(t)
	const a, r = "demo", "chat-off"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "chat", AdminUserIds: []string{"adm"}}); err != nil {
		t.Fatal(err)
	}
	app.fakeIM.SetCallbacks(&imfake.Callbacks{URL: "http://" + app.HTTPAddr() + "/callbacks/im", Token: token})
	for _, u := range []string{"adm", "bob"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"owner", "adm", "bob"} {
		if err := app.fakeIM.JoinFromClient(gid, u); err != nil {
			t.Fatalf("%s joins the group: %v", u, err)
		}
	}
	reply, err := rc.SetChatDisabled(ctx, &v1.SetChatDisabledRequest{CommandId: "off", AppCode: a, RoomId: r, UserId: "adm", Disabled: true})
	if err != nil || !reply.GetRoom().GetChatDisabled() {
		t.Fatalf("disable chat: %v %v", reply.GetRoom(), err)
	}
	// A member may not turn it back.
	if _, err := rc.SetChatDisabled(ctx, &v1.SetChatDisabledRequest{CommandId: "on-bob", AppCode: a, RoomId: r, UserId: "bob"}); err == nil {
		t.Fatal("a member turned the switch")
	}
	time.Sleep(1100 * time.Millisecond) // the endpoint's views are at most view_ttl (1s) old
	if err := app.fakeIM.SendFromClient(gid, "bob", "shh"); !errors.Is(err, imfake.ErrRefusedByApp) {
		t.Fatalf("a member's message while chat is disabled: %v", err)
	}
	for _, u := range []string{"owner", "adm"} {
		if err := app.fakeIM.SendFromClient(gid, u, "from "+u); err != nil {
			t.Fatalf("%s's message while chat is disabled: %v", u, err)
		}
	}
	if _, err := rc.SetChatDisabled(ctx, &v1.SetChatDisabledRequest{CommandId: "on", AppCode: a, RoomId: r, UserId: "owner"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := app.fakeIM.SendFromClient(gid, "bob", "back"); err != nil {
		t.Fatalf("a member's message once chat is enabled: %v", err)
	}
	var texts []string
	for _, m := range app.fakeIM.ClientMessages() {
		texts = append(texts, m.Text)
	}
	if len(texts) != 3 || texts[0] != "from owner" || texts[1] != "from adm" || texts[2] != "back" {
		t.Fatalf("messages out: %v", texts)
	}
}
