package tencentcb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/room"
)

const imToken = "im-callback-token"

func newIM(t testing.TB, rooms Rooms, now func() time.Time) *IM {
	t.Helper()
	h, err := NewIM(configs.IMCallbackConfig{Enabled: true, Token: imToken, MaxSkew: time.Minute, MaxBody: 64 << 10,
		AnswerTimeout: time.Second, ViewTTL: time.Second, Path: "/callbacks/im"}, testApp, rooms, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if now != nil {
		h.now = now
	}
	return h
}

// imPost posts an IM callback as Tencent does: the command and the
// authentication in the query (Sign = hex(sha256(token + RequestTime)),
// computed here from IM's page), the body as JSON.
func imPost(h http.Handler, command, platform string, at time.Time, token string, body any) (int, imAnswer) {
	rt := strconv.FormatInt(at.Unix(), 10)
	sum := sha256.Sum256([]byte(token + rt))
	q := url.Values{"SdkAppid": {fmt.Sprint(testApp)}, "CallbackCommand": {command}, "contenttype": {"json"},
		"ClientIP": {"1.2.3.4"}, "OptPlatform": {platform}, "Sign": {hex.EncodeToString(sum[:])}, "RequestTime": {rt}}
	b, _ := json.Marshal(body)
	req := httptest.NewRequest(http.MethodPost, "/callbacks/im?"+q.Encode(), bytes.NewReader(b))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var a imAnswer
	_ = json.Unmarshal(w.Body.Bytes(), &a)
	return w.Code, a
}

func sendMsg(gid, from string) map[string]any {
	return map[string]any{"CallbackCommand": IMBeforeSendMsg, "GroupId": gid, "Type": "AVChatRoom", "From_Account": from,
		"Random": 1, "MsgBody": []any{map[string]any{"MsgType": "TIMTextElem", "MsgContent": map[string]string{"Text": "hi"}}}}
}

// TestIMBeforeSendMsgFollowsTheRoom: a member speaks; a stranger, a
// banned user and a chat-muted member are refused (ErrorCode 1); the
// app's own server is never asked about; a group that is no room's is
// none of the room's business.
func TestIMBeforeSendMsgFollowsTheRoom(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	now := time.UnixMilli(t0 + 1000)
	for _, c := range []room.Command{
		{Type: room.CmdJoinRoom, CommandID: "j-carol", UserID: "carol"},
		{Type: room.CmdMuteMember, CommandID: "mute", UserID: "owner", TargetUserID: "carol", MuteSeconds: 600},
		{Type: room.CmdJoinRoom, CommandID: "j-bad", UserID: "bad"},
		{Type: room.CmdKickUser, CommandID: "kick", UserID: "owner", TargetUserID: "bad", BanSeconds: 600},
	} {
		c.AppCode, c.RoomID, c.NowMs = "app", "r1", t0
		if err := m.do(c); err != nil {
			t.Fatal(err)
		}
	}
	h := newIM(t, m, func() time.Time { return now })
	for _, c := range []struct {
		from, platform string
		refused        bool
	}{
		{"alice", "Android", false},
		{"bob", "iOS", false},
		{"stranger", "Android", true},
		{"bad", "Web", true},
		{"carol", "Android", true},
		{"room_bot", imRESTAPI, false},
	} {
		code, a := imPost(h, IMBeforeSendMsg, c.platform, now, imToken, sendMsg(gid, c.from))
		if code != 200 || a.ActionStatus != "OK" || (a.ErrorCode == imRefuse) != c.refused {
			t.Errorf("%s: %d %+v, want refused=%v", c.from, code, a, c.refused)
		}
	}
	if code, a := imPost(h, IMBeforeSendMsg, "Android", now, imToken, sendMsg("@TGS#2J4SZEAEL", "stranger")); code != 200 || a.ErrorCode != 0 {
		t.Fatalf("a group that is no room's: %d %+v", code, a)
	}
	// A stranger refused joining too; a member let in.
	if _, a := imPost(h, IMBeforeApplyJoin, "Android", now, imToken, map[string]any{"GroupId": gid, "Type": "AVChatRoom", "Requestor_Account": "stranger"}); a.ErrorCode != imRefuse {
		t.Fatalf("stranger's join: %+v", a)
	}
	if _, a := imPost(h, IMBeforeApplyJoin, "Android", now, imToken, map[string]any{"GroupId": gid, "Type": "AVChatRoom", "Requestor_Account": "carol"}); a.ErrorCode != 0 {
		t.Fatalf("a muted member's join: %+v", a)
	}
	// The view is reused within view_ttl, then asked again: an unmute
	// shows within it.
	calls := m.calls.Load()
	imPost(h, IMBeforeSendMsg, "Android", now, imToken, sendMsg(gid, "alice"))
	if m.calls.Load() != calls {
		t.Fatal("a fresh view was not reused")
	}
	if err := m.do(room.Command{Type: room.CmdUnmuteMember, CommandID: "unmute", AppCode: "app", RoomID: "r1", UserID: "owner", TargetUserID: "carol", NowMs: t0}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if _, a := imPost(h, IMBeforeSendMsg, "Android", now, imToken, sendMsg(gid, "carol")); a.ErrorCode != 0 {
		t.Fatalf("carol unmuted, a view_ttl later: %+v", a)
	}
}

// TestIMCallbackAuthentication: a wrong token, a stale or future
// RequestTime (a replay), another app, or no Sign: 401 with no room asked;
// a State.StateChange with the right one is taken.
func TestIMCallbackAuthentication(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	now := time.UnixMilli(t0)
	h := newIM(t, m, func() time.Time { return now })
	msg := sendMsg(gid, "stranger")
	for name, c := range map[string]struct {
		at    time.Time
		token string
	}{
		"wrong token":      {now, "other"},
		"replay of 2m ago": {now.Add(-2 * time.Minute), imToken},
		"from the future":  {now.Add(2 * time.Minute), imToken},
		"no token (empty)": {now, ""},
	} {
		if code, _ := imPost(h, IMBeforeSendMsg, "Android", c.at, c.token, msg); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/callbacks/im?CallbackCommand="+IMBeforeSendMsg, bytes.NewReader([]byte(`{}`)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("no Sign at all: %d", w.Code)
	}
	if n := m.calls.Load(); n != 0 {
		t.Fatalf("%d room calls from unauthenticated callbacks", n)
	}
	state := map[string]any{"CallbackCommand": IMStateChange, "EventTime": t0, "Info": map[string]string{"Action": "Disconnect", "To_Account": "alice", "Reason": "LinkClose"}}
	if code, a := imPost(h, IMStateChange, "Android", now.Add(-30*time.Second), imToken, state); code != 200 || a.ActionStatus != "OK" {
		t.Fatalf("state change: %d %+v", code, a)
	}
}

// TestIMBeforeSendMsgChatDisabled: while the room's chat is disabled for
// all, a member's message is refused and the owner's and an admin's go
// through; once it is enabled again (a view_ttl later) the member speaks.
func TestIMBeforeSendMsgChatDisabled(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	do := func(c room.Command) {
		t.Helper()
		c.AppCode, c.RoomID, c.NowMs = "app", "r1", t0
		if err := m.do(c); err != nil {
			t.Fatal(err)
		}
	}
	do(room.Command{Type: room.CmdSetAdmin, CommandID: "a", UserID: "owner", TargetUserID: "bob"})
	do(room.Command{Type: room.CmdSetChatDisabled, CommandID: "off", UserID: "bob", ChatDisabled: true})
	now := time.UnixMilli(t0 + 1000)
	h := newIM(t, m, func() time.Time { return now })
	for from, refused := range map[string]bool{"alice": true, "owner": false, "bob": false, "stranger": true} {
		if _, a := imPost(h, IMBeforeSendMsg, "Android", now, imToken, sendMsg(gid, from)); (a.ErrorCode == imRefuse) != refused {
			t.Errorf("chat disabled, %s: %+v, want refused=%v", from, a, refused)
		}
	}
	// Joining is not speaking: a member still enters the group.
	if _, a := imPost(h, IMBeforeApplyJoin, "Android", now, imToken, map[string]any{"GroupId": gid, "Type": "AVChatRoom", "Requestor_Account": "alice"}); a.ErrorCode != 0 {
		t.Fatalf("a member's join while chat is disabled: %+v", a)
	}
	do(room.Command{Type: room.CmdSetChatDisabled, CommandID: "on", UserID: "owner", ChatDisabled: false})
	now = now.Add(time.Second)
	if _, a := imPost(h, IMBeforeSendMsg, "Android", now, imToken, sendMsg(gid, "alice")); a.ErrorCode != 0 {
		t.Fatalf("chat enabled again, a view_ttl later: %+v", a)
	}
}
