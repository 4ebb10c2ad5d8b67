package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/room"
)

const cbKey = "e2eCallbackKey1"

// audioLeftReleases counts the room's seat releases for a lost audio.
func audioLeftReleases(t *testing.T, rc v1.RoomServiceClient, app, roomID string) int {
	t.Helper()
	reply, err := rc.ListRoomEvents(ctxT(t), &v1.ListRoomEventsRequest{AppCode: app, RoomId: roomID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range reply.Events {
		if e.EventType == room.TypeRoomMicReleased && strings.Contains(e.Payload, room.ReasonAudioLeft) {
			n++
		}
	}
	return n
}

// TestTRTCCallbackFreesGhostSeatEndToEnd: a dev process with the TRTC
// callback endpoint on its HTTP listener, and Tencent's poster (the fake's,
// signing with the console key, every callback sent twice): a seated
// member's audio drops (104, reason timeout) and the seat is freed once,
// within seat_grace + 1 s; another who drops and comes back within the
// grace keeps the seat; a member publishing without a seat is removed
// from the audio room; an unsigned post is refused and changes nothing.
func TestTRTCCallbackFreesGhostSeatEndToEnd(t *testing.T) {
	const grace = 500 * time.Millisecond
	app, rc := startDev(t, func(c *configs.Config) {
		c.TRTC.Callback = configs.TRTCCallbackConfig{Enabled: true, Key: cbKey}
		c.TRTC.Callback.Path, c.TRTC.Callback.MaxBody, c.TRTC.Callback.AnswerTimeout = "/callbacks/trtc", 64<<10, 3*time.Second
		c.TRTC.SeatGrace = grace
	})
	ctx := ctxT(t)
	const a, r = "demo", "cb-1"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "cb"}); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"alice", "bob", "carol"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprintf("j%d", i), AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range []string{"alice", "bob"} {
		if _, err := rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: fmt.Sprintf("m%d", i), AppCode: a, RoomId: r, UserId: u, Seat: int32(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	url := "http://" + app.HTTPAddr() + "/callbacks/trtc"

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"EventType":104,"EventInfo":{"RoomId":"`+gid+`","UserId":"alice","EventMsTs":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned callback: %d, want 401", resp.StatusCode)
	}

	cb := trtcfake.NewCallbacks(url, cbKey, 0, trtcfake.WithRetry(100*time.Millisecond, 5*time.Second))
	defer cb.Close()
	cb.SetDuplicate(true)
	tencent := app.fakeTRTC
	tencent.SetCallbacks(cb)
	for _, u := range []string{"alice", "bob", "carol"} {
		tencent.UserEnters(gid, u)
	}
	dropped := time.Now()
	tencent.UserExits(gid, "alice", trtcfake.ExitTimeout)
	tencent.UserExits(gid, "bob", trtcfake.ExitTimeout)
	time.Sleep(50 * time.Millisecond)
	tencent.UserEnters(gid, "bob")                       // back within the grace
	cb.Report(trtcfake.EventStartAudio, gid, "carol", 0) // publishing without a seat
	cb.Wait()
	if cb.GaveUp() != 0 {
		t.Fatalf("%d callbacks never taken", cb.GaveUp())
	}
	eventually(t, grace+time.Second, "alice's seat freed", func() bool {
		g, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
		return err == nil && g.Room.Seats[1].UserId == ""
	})
	if took := time.Since(dropped); took > grace+time.Second {
		t.Fatalf("seat freed %s after the drop, want within %s", took, grace+time.Second)
	}
	time.Sleep(2 * grace)
	g, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	if g.Room.Seats[2].UserId != "bob" {
		t.Fatalf("bob came back within the grace and lost the seat: %v", g.Room.Seats)
	}
	if n := audioLeftReleases(t, rc, a, r); n != 1 {
		t.Fatalf("%d audio_left releases, want alice's alone", n)
	}
	eventually(t, 3*time.Second, "carol out of the audio room", func() bool { return !app.fakeTRTC.InRoom(gid, "carol") && inRemoved(app, gid, "carol") })
}

func inRemoved(app *App, gid, user string) bool {
	for _, u := range app.fakeTRTC.Removed(gid) {
		if u == user {
			return true
		}
	}
	return false
}

// TestDevAudioCutSwitch: in --dev with the callback endpoint on, the fake
// TRTC reports to the node itself, and the dev switch that cuts a user's
// audio frees their seat after the grace.
func TestDevAudioCutSwitch(t *testing.T) {
	const grace = 300 * time.Millisecond
	app, rc := startDev(t, func(c *configs.Config) {
		c.TRTC.Callback.Enabled, c.TRTC.Callback.Key = true, cbKey
		c.TRTC.SeatGrace = grace
	})
	ctx := ctxT(t)
	const a, r = "demo", "cut-1"
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "cut"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: "m1", AppCode: a, RoomId: r, UserId: "owner", Seat: 0}); err != nil {
		t.Fatal(err)
	}
	app.fakeTRTC.UserEnters(roomim.GroupID(a, r), "owner")
	resp, err := http.Post("http://"+app.HTTPAddr()+"/debug/fake-trtc/cut?app_code="+a+"&room_id="+r+"&user_id=owner", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("cut: %d", resp.StatusCode)
	}
	eventually(t, grace+time.Second, "the cut user's seat freed", func() bool {
		g, err := rc.GetRoom(context.Background(), &v1.GetRoomRequest{AppCode: a, RoomId: r})
		return err == nil && g.Room.Seats[0].UserId == ""
	})
}

// TestIMBeforeSendMsgEndToEnd: through a dev process, the IM callback
// endpoint answers Tencent from the room's own state: a member speaks, a
// stranger is refused; a callback without the token's signature is 401.
func TestIMBeforeSendMsgEndToEnd(t *testing.T) {
	const token = "e2e-im-token"
	app, rc := startDev(t, func(c *configs.Config) {
		c.TencentIM.Callback.Enabled, c.TencentIM.Callback.Token = true, token
	})
	ctx := ctxT(t)
	const a, r = "demo", "im-1"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "im"}); err != nil {
		t.Fatal(err)
	}
	ask := func(from, tok string) (int, string) {
		rt := fmt.Sprint(time.Now().Unix())
		sum := sha256.Sum256([]byte(tok + rt))
		u := "http://" + app.HTTPAddr() + "/callbacks/im?SdkAppid=0&CallbackCommand=Group.CallbackBeforeSendMsg&contenttype=json&ClientIP=1.2.3.4&OptPlatform=Android&Sign=" +
			hex.EncodeToString(sum[:]) + "&RequestTime=" + rt
		resp, err := http.Post(u, "application/json", strings.NewReader(`{"CallbackCommand":"Group.CallbackBeforeSendMsg","GroupId":"`+gid+`","Type":"AVChatRoom","From_Account":"`+from+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := ask("owner", token); code != 200 || !strings.Contains(body, `"ErrorCode":0`) {
		t.Fatalf("member: %d %s", code, body)
	}
	if code, body := ask("stranger", token); code != 200 || !strings.Contains(body, `"ErrorCode":1`) {
		t.Fatalf("stranger: %d %s", code, body)
	}
	if code, _ := ask("owner", "forged"); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d", code)
	}

	// The fake IM asks the same endpoint the way Tencent does, before a
	// client's join and message: the member joins and speaks; a stranger
	// is refused the join, and a member muted in the room cannot speak.
	app.fakeIM.SetCallbacks(&imfake.Callbacks{URL: "http://" + app.HTTPAddr() + "/callbacks/im", Token: token})
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j1", AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"owner", "bob"} {
		if err := app.fakeIM.JoinFromClient(gid, u); err != nil {
			t.Fatalf("%s joins the group: %v", u, err)
		}
	}
	if err := app.fakeIM.JoinFromClient(gid, "stranger"); !errors.Is(err, imfake.ErrRefusedByApp) {
		t.Fatalf("a stranger's join: %v", err)
	}
	if err := app.fakeIM.SendFromClient(gid, "bob", "hello"); err != nil {
		t.Fatalf("a member's message: %v", err)
	}
	if _, err := rc.MuteMember(ctx, &v1.MuteMemberRequest{CommandId: "mute1", AppCode: a, RoomId: r, UserId: "owner", TargetUserId: "bob", MuteSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the endpoint's view of bob is at most view_ttl (1s) old
	err := app.fakeIM.SendFromClient(gid, "bob", "still here")
	if !errors.Is(err, imfake.ErrRefusedByApp) && !errors.Is(err, imfake.ErrMuted) {
		t.Fatalf("a muted member's message: %v", err)
	}
	if got := app.fakeIM.ClientMessages(); len(got) != 1 || got[0].Text != "hello" {
		t.Fatalf("messages out: %+v", got)
	}
	app.fakeIM.StateChange("bob", "Disconnect", "LinkClose")
}

// TestIMPresenceSourceEndToEnd: a dev process with presence.source im and
// nobody heartbeating. The fake IM posts State.StateChange the way
// Tencent does: a member who disconnects leaves stale_after later
// (heartbeat_timeout, the stale worker's reason), once; one who logs out
// and back in within the window stays; members IM says nothing about, or
// says are online, stay for many windows without a heartbeat.
func TestIMPresenceSourceEndToEnd(t *testing.T) {
	const token, stale = "e2e-im-token", 1500 * time.Millisecond
	app, rc := startDev(t, func(c *configs.Config) {
		c.TencentIM.Callback.Enabled, c.TencentIM.Callback.Token = true, token
		c.Presence.Source, c.Presence.AppCodes = configs.PresenceIM, []string{"demo"}
		c.Presence.StaleAfter, c.Presence.ScanInterval = stale, 250*time.Millisecond
	})
	app.fakeIM.SetCallbacks(&imfake.Callbacks{URL: "http://" + app.HTTPAddr() + "/callbacks/im", Token: token})
	ctx := ctxT(t)
	const a, r = "demo", "im-presence"
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"bob", "carol", "dave"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
		// IM names a user, not a room: the directory must know the room.
		deadline := time.Now().Add(3 * time.Second)
		for ur, err := app.directory.UserRoom(ctx, a, u); err != nil || ur.RoomID != r; ur, err = app.directory.UserRoom(ctx, a, u) {
			if time.Now().After(deadline) {
				t.Fatalf("%s's directory entry: %+v %v", u, ur, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	members := func() []string {
		reply, err := rc.GetRoom(ctxT(t), &v1.GetRoomRequest{AppCode: a, RoomId: r})
		if err != nil {
			t.Fatal(err)
		}
		return reply.GetRoom().GetMembers()
	}
	app.fakeIM.StateChange("carol", "Login", "Register")
	app.fakeIM.StateChange("bob", "Disconnect", "LinkClose")
	gone := time.Now()
	app.fakeIM.StateChange("carol", "Logout", "Unregister")
	time.Sleep(10 * time.Millisecond)
	app.fakeIM.StateChange("carol", "Login", "Register")
	for slices.Contains(members(), "bob") {
		if time.Since(gone) > stale+2*time.Second {
			t.Fatalf("bob still a member %s after his disconnect (stale_after %s)", time.Since(gone), stale)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(gone)
	if took < stale-100*time.Millisecond {
		t.Fatalf("bob left %s after his disconnect, before stale_after %s", took, stale)
	}
	t.Logf("bob left %s after his disconnect (stale_after %s)", took.Round(time.Millisecond), stale)
	time.Sleep(3 * stale) // many windows without a single heartbeat
	if got := members(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"carol", "dave", "owner"}) {
		t.Fatalf("members %v, want carol (back within the window), dave and owner (never offline)", got)
	}
	reply, err := rc.ListRoomEvents(ctxT(t), &v1.ListRoomEventsRequest{AppCode: a, RoomId: r, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var leaves []string
	for _, e := range reply.Events {
		if e.EventType == room.TypeRoomUserLeft {
			leaves = append(leaves, e.Payload)
		}
	}
	if len(leaves) != 1 || !strings.Contains(leaves[0], `"bob"`) || !strings.Contains(leaves[0], room.ReasonHeartbeatTimeout) {
		t.Fatalf("leaves %v, want bob's heartbeat_timeout once", leaves)
	}
}

// TestTRTCPresenceSourceEndToEnd: a dev process with presence.source trtc
// and nobody heartbeating; the fake TRTC reports to the node itself. A
// seated member whose audio is cut loses the seat after seat_grace and
// leaves the room after stale_after (heartbeat_timeout); one cut who
// enters again within stale_after stays; one who stays in the audio room
// stays for many windows.
func TestTRTCPresenceSourceEndToEnd(t *testing.T) {
	const grace, stale = 300 * time.Millisecond, 1200 * time.Millisecond
	app, rc := startDev(t, func(c *configs.Config) {
		c.TRTC.Callback.Enabled, c.TRTC.Callback.Key = true, cbKey
		c.TRTC.SeatGrace = grace
		c.Presence.Source, c.Presence.StaleAfter, c.Presence.ScanInterval = configs.PresenceTRTC, stale, 250*time.Millisecond
	})
	ctx := ctxT(t)
	const a, r = "demo", "trtc-presence"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "owner", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"bob", "carol"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: "m1", AppCode: a, RoomId: r, UserId: "bob", Seat: 1}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"owner", "bob", "carol"} {
		app.fakeTRTC.UserEnters(gid, u)
	}
	cut := func(u string) {
		resp, err := http.Post("http://"+app.HTTPAddr()+"/debug/fake-trtc/cut?app_code="+a+"&room_id="+r+"&user_id="+u, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("cut %s: %d", u, resp.StatusCode)
		}
	}
	view := func() *v1.RoomView {
		g, err := rc.GetRoom(ctxT(t), &v1.GetRoomRequest{AppCode: a, RoomId: r})
		if err != nil {
			t.Fatal(err)
		}
		return g.GetRoom()
	}
	cut("bob")
	cut("carol")
	gone := time.Now()
	time.Sleep(stale / 3)
	app.fakeTRTC.UserEnters(gid, "carol") // back within the window
	eventually(t, grace+time.Second, "bob's seat freed", func() bool { return view().GetSeats()[1].GetUserId() == "" })
	if !slices.Contains(view().GetMembers(), "bob") {
		t.Fatal("bob left with the seat's grace, before stale_after")
	}
	eventually(t, stale+2*time.Second, "bob out of the room", func() bool { return !slices.Contains(view().GetMembers(), "bob") })
	if took := time.Since(gone); took < stale-100*time.Millisecond {
		t.Fatalf("bob left %s after the cut, before stale_after %s", took, stale)
	}
	time.Sleep(3 * stale)
	if got := slices.Sorted(slices.Values(view().GetMembers())); !slices.Equal(got, []string{"carol", "owner"}) {
		t.Fatalf("members %v, want carol (back within the window) and owner (never out)", got)
	}
}
