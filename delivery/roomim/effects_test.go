package roomim_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/room"
)

// audio starts a fake TRTC and a client on it.
func audio(t *testing.T) (*trtcfake.Server, *trtc.Client) {
	t.Helper()
	fake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	c, err := trtc.New(fake.ClientConfig(), trtc.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func apiOrder(f *imfake.Server, apis ...string) []string {
	want := map[string]bool{}
	for _, a := range apis {
		want[a] = true
	}
	var out []string
	for _, c := range f.Calls() {
		if want[c.API] && c.Code == 0 && c.HTTPStatus == 0 {
			out = append(out, c.API)
		}
	}
	return out
}

// TestKickBansOnAVChatRoom: on an AVChatRoom a kick with a ban is a
// Tencent member ban for what is left of it, after the kick message (so
// the user gets it): the user is out of the group, gets none of its later
// messages, cannot enter again while banned, and is out of the audio
// room. delete_group_member (which an AVChatRoom refuses) is never called.
func TestKickBansOnAVChatRoom(t *testing.T) {
	ctx := ctxT(t)
	now := time.Now()
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient), roomim.WithClock(func() time.Time { return now }))
	gid := roomim.GroupID("lalu", "av1")
	if err := f.pub.EnsureGroup(ctx, "lalu", "av1", "host", "av1"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"host", "bad", "other"} {
		if err := f.fake.EnterGroup(gid, u); err != nil {
			t.Fatal(err)
		}
		tfake.EnterRoom(gid, u)
	}
	banUntil := now.Add(600 * time.Second).UnixMilli()
	kick := envelope(t, "lalu", "av1", 5, room.RoomUserKicked{TargetUserID: "bad", OperatorUserID: "host", Reason: "spam", BanUntilMs: banUntil})
	if err := f.pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatal(err)
	}
	after := envelope(t, "lalu", "av1", 6, room.RoomMicTaken{UserID: "other", Seat: 1})
	if err := f.pub.PublishRoomEvent(ctx, after); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(apiOrder(f.fake, tencentim.APISendGroupMsg, tencentim.APIBanGroupMember, tencentim.APIDeleteGroupMember))
	if want := fmt.Sprint([]string{tencentim.APISendGroupMsg, tencentim.APIBanGroupMember, tencentim.APISendGroupMsg}); got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
	until, banned := f.fake.BannedUntil(gid, "bad")
	if !banned || until.Sub(time.UnixMilli(banUntil)).Abs() > time.Second {
		t.Fatalf("ban until %v (banned %v), want %v", until, banned, time.UnixMilli(banUntil))
	}
	if f.fake.InGroup(gid, "bad") || !f.fake.InGroup(gid, "other") {
		t.Fatal("the banned user must be out of the group, the others in")
	}
	if err := f.fake.EnterGroup(gid, "bad"); !errors.Is(err, imfake.ErrBanned) {
		t.Fatalf("banned user re-entering: %v", err)
	}
	recv := f.fake.Received(gid, "bad")
	if len(recv) != 1 || recv[0].EventIDs[0] != kick.EventID {
		t.Fatalf("the banned user got %d messages (%v); want the kick message alone", len(recv), recv)
	}
	if n := len(f.fake.Received(gid, "other")); n != 2 {
		t.Fatalf("others got %d messages, want 2", n)
	}
	if tfake.InRoom(gid, "bad") || !tfake.InRoom(gid, "other") {
		t.Fatal("the kicked user must be out of the audio room, the others in")
	}
}

// TestKickWithoutBanOnAVChatRoom: nothing to enforce on an AVChatRoom (the
// user may rejoin at once): no ban, no delete; the audio room still loses
// the user.
func TestKickWithoutBanOnAVChatRoom(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "av2")
	if err := f.pub.EnsureGroup(ctx, "lalu", "av2", "", "av2"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "u")
	if err := f.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "av2", 3, room.RoomUserKicked{TargetUserID: "u"})); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.CallCount(tencentim.APIBanGroupMember) + f.fake.CallCount(tencentim.APIDeleteGroupMember); n != 0 {
		t.Fatalf("%d member calls for a kick without ban", n)
	}
	if _, banned := f.fake.BannedUntil(gid, "u"); banned || tfake.InRoom(gid, "u") {
		t.Fatal("no ban, but out of the audio room")
	}
}

// TestKickRemovesOnOtherGroupTypes: a Public group removes the member
// and never bans.
func TestKickRemovesOnOtherGroupTypes(t *testing.T) {
	ctx := ctxT(t)
	f := setup(t, func(c *configs.TencentIMConfig) { c.GroupType = "Public" })
	gid := roomim.GroupID("lalu", "pub")
	if err := f.pub.EnsureGroup(ctx, "lalu", "pub", "", "pub"); err != nil {
		t.Fatal(err)
	}
	if err := f.fake.EnterGroup(gid, "bad"); err != nil {
		t.Fatal(err)
	}
	kick := envelope(t, "lalu", "pub", 4, room.RoomUserKicked{TargetUserID: "bad", BanUntilMs: time.Now().Add(time.Hour).UnixMilli()})
	if err := f.pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatal(err)
	}
	if f.fake.InGroup(gid, "bad") || f.fake.CallCount(tencentim.APIBanGroupMember) != 0 || f.fake.CallCount(tencentim.APIDeleteGroupMember) != 1 {
		t.Fatalf("in group %v, ban calls %d, delete calls %d", f.fake.InGroup(gid, "bad"),
			f.fake.CallCount(tencentim.APIBanGroupMember), f.fake.CallCount(tencentim.APIDeleteGroupMember))
	}
}

// TestEffectFailureHoldsTheRoomBack: while a kick's ban fails, the kick
// fails (the outbox keeps it) and the room's later events are held back
// unsent; the retry does the ban without sending the kick message again,
// then the later events go.
func TestEffectFailureHoldsTheRoomBack(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "hold")
	if err := f.pub.EnsureGroup(ctx, "lalu", "hold", "", "hold"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "bad")
	kick := envelope(t, "lalu", "hold", 7, room.RoomUserKicked{TargetUserID: "bad", BanUntilMs: time.Now().Add(time.Hour).UnixMilli()})
	next := envelope(t, "lalu", "hold", 8, room.RoomMicTaken{UserID: "x", Seat: 0})

	// IM's ban fails: the kick fails retryably, the next event is held back.
	f.fake.FailNext(1, 10002, tencentim.APIBanGroupMember)
	k, n := f.pub.Enqueue(ctx, kick), f.pub.Enqueue(ctx, next)
	if err := <-k; !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("kick with the ban failing: %v", err)
	}
	if err := <-n; !errors.Is(err, roomim.ErrHeldBack) {
		t.Fatalf("event after a failed kick: %v, want held back", err)
	}
	// TRTC fails next: the ban is done and stays done, the audio step fails.
	tfake.SetFailing("InternalError")
	if err := f.pub.PublishRoomEvent(ctx, kick); trtc.CodeOf(err) != "InternalError" {
		t.Fatalf("kick with TRTC failing: %v", err)
	}
	tfake.SetFailing("")
	if err := f.pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatal(err)
	}
	if err := f.pub.PublishRoomEvent(ctx, next); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.CallCount(tencentim.APISendGroupMsg); n != 2 {
		t.Fatalf("%d group sends, want 2 (the kick message once, then the next event)", n)
	}
	if n := f.fake.CallCount(tencentim.APIBanGroupMember); n != 2 {
		t.Fatalf("%d ban calls, want 2 (the failed one and one success)", n)
	}
	msgs := f.fake.GroupMessages(gid)
	if len(msgs) != 2 || msgs[0].EventIDs[0] != kick.EventID || msgs[1].EventIDs[0] != next.EventID {
		t.Fatalf("messages out of order: %+v", msgs)
	}
	if tfake.InRoom(gid, "bad") || len(tfake.Removed(gid)) != 1 {
		t.Fatalf("audio: in room %v, removed %v", tfake.InRoom(gid, "bad"), tfake.Removed(gid))
	}
}

// TestCloseTearsDown: a close sends its message, dismisses the audio room
// and destroys the group, in that order; a retry after the group is gone
// (another process, nothing remembered) neither fails nor makes the group
// again.
func TestCloseTearsDown(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "bye")
	if err := f.pub.EnsureGroup(ctx, "lalu", "bye", "", "bye"); err != nil {
		t.Fatal(err)
	}
	if err := f.fake.EnterGroup(gid, "u"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "u")
	closed := envelope(t, "lalu", "bye", 9, room.RoomClosed{OperatorUserID: "host"})
	f.fake.FailNext(1, 10002, tencentim.APIDestroyGroup)
	if err := f.pub.PublishRoomEvent(ctx, closed); !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("close with destroy failing: %v", err)
	}
	if tfake.RoomExists(gid) || tfake.Dismissed(gid) != 1 {
		t.Fatal("the audio room is dismissed before the group goes")
	}
	if err := f.pub.PublishRoomEvent(ctx, closed); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.fake.Group(gid); ok || f.fake.InGroup(gid, "u") {
		t.Fatal("group must be destroyed, its members out")
	}
	if tfake.Dismissed(gid) != 1 || f.fake.CallCount(tencentim.APISendGroupMsg) != 1 {
		t.Fatalf("retry repeated done steps: %d dismissals, %d sends", tfake.Dismissed(gid), f.fake.CallCount(tencentim.APISendGroupMsg))
	}
	other := roomim.New(f.client, roomim.WithLogger(quiet), roomim.WithAudio(tclient))
	defer other.Close()
	if err := other.PublishRoomEvent(ctx, closed); err != nil {
		t.Fatalf("close again elsewhere: %v", err)
	}
	if _, ok := f.fake.Group(gid); ok || f.fake.CallCount(tencentim.APICreateGroup) != 1 {
		t.Fatal("a repeated close made the group again")
	}
}

// TestEffectRefusedIsPermanent: a TRTC refusal of the request itself is
// permanent (the relay parks the event for an operator instead of
// retrying it for ever); an outage is not.
func TestEffectRefusedIsPermanent(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	if err := f.pub.EnsureGroup(ctx, "lalu", "perm", "", "perm"); err != nil {
		t.Fatal(err)
	}
	permanent := func(err error) bool {
		var p interface{ Permanent() bool }
		return errors.As(err, &p) && p.Permanent()
	}
	kick := envelope(t, "lalu", "perm", 3, room.RoomUserKicked{TargetUserID: "u"})
	tfake.FailNext(1, "InvalidParameter.UserIds")
	if err := f.pub.PublishRoomEvent(ctx, kick); err == nil || !permanent(err) {
		t.Fatalf("refused audio removal: %v (permanent %v), want permanent", err, permanent(err))
	}
	tfake.FailNext(1, "InternalError")
	if err := f.pub.PublishRoomEvent(ctx, kick); err == nil || permanent(err) {
		t.Fatalf("audio outage: %v, want a retryable error", err)
	}
	if err := f.pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatal(err)
	}
}

// TestRetriedKickMessageShownOnce: a kick travels alone, never in a batch
// with the events queued around it, so its message is always the same
// one. When its audio step fails after the message went out and another
// process retries it alone with no record of the steps done (no
// WithEffectSteps here: as when recording them failed), Tencent's dedupe
// drops the second send within its window: the room sees the kick
// message once. (In a batch with
// the event before it, the first message and the lone retry differed and
// the room saw the kick twice.) The events around it still go in order.
func TestRetriedKickMessageShownOnce(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "once")
	if err := f.pub.EnsureGroup(ctx, "lalu", "once", "", "once"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "bad")
	before := envelope(t, "lalu", "once", 6, room.RoomMicTaken{UserID: "x", Seat: 0})
	kick := envelope(t, "lalu", "once", 7, room.RoomUserKicked{TargetUserID: "bad", BanUntilMs: time.Now().Add(time.Hour).UnixMilli()})
	after := envelope(t, "lalu", "once", 8, room.RoomMicTaken{UserID: "y", Seat: 1})
	tfake.SetFailing("InternalError")
	b, k, a := f.pub.Enqueue(ctx, before), f.pub.Enqueue(ctx, kick), f.pub.Enqueue(ctx, after)
	if err := <-b; err != nil {
		t.Fatalf("event before the kick: %v", err)
	}
	if err := <-k; trtc.CodeOf(err) != "InternalError" {
		t.Fatalf("kick with TRTC failing: %v", err)
	}
	if err := <-a; !errors.Is(err, roomim.ErrHeldBack) {
		t.Fatalf("event after the failed kick: %v, want held back", err)
	}
	tfake.SetFailing("")
	// Another process: the same IM and TRTC, nothing remembered.
	other := roomim.New(f.client, roomim.WithLogger(quiet), roomim.WithAudio(tclient))
	t.Cleanup(other.Close)
	if err := other.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatal(err)
	}
	if err := other.PublishRoomEvent(ctx, after); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	shown := 0
	for _, m := range f.fake.GroupMessages(gid) {
		got = append(got, m.EventIDs)
		for _, id := range m.EventIDs {
			if id == kick.EventID {
				shown++
			}
		}
	}
	if shown != 1 {
		t.Fatalf("the kick message reached the room %d times, want once: %v", shown, got)
	}
	if want := fmt.Sprint([][]string{{before.EventID}, {kick.EventID}, {after.EventID}}); fmt.Sprint(got) != want {
		t.Fatalf("messages %v, want %s", got, want)
	}
	if f.fake.Duplicates() != 1 {
		t.Fatalf("Tencent dropped %d repeats, want the retried kick's one", f.fake.Duplicates())
	}
	if tfake.InRoom(gid, "bad") {
		t.Fatal("the retried kick must remove the user from the audio room")
	}
}

// TestAudioRemovalTakesUserOutOfAudioRoom: a RoomAudioRemoved (a user in
// the audio room or publishing against the room's word) is sent to the
// group, then the user is out of the audio room; the others stay, and the
// IM group's membership is not touched.
func TestAudioRemovalTakesUserOutOfAudioRoom(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "aud")
	if err := f.pub.EnsureGroup(ctx, "lalu", "aud", "", "aud"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "sneaky")
	tfake.EnterRoom(gid, "seated")
	ev := envelope(t, "lalu", "aud", 4, room.RoomAudioRemoved{UserID: "sneaky", Reason: room.AudioRemovedNoSeat, Kind: room.AudioStart})
	if err := f.pub.PublishRoomEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if tfake.InRoom(gid, "sneaky") || !tfake.InRoom(gid, "seated") {
		t.Fatal("the removed user must be out of the audio room, the other in")
	}
	if n := f.fake.CallCount(tencentim.APIBanGroupMember) + f.fake.CallCount(tencentim.APIDeleteGroupMember); n != 0 {
		t.Fatalf("%d IM member calls for an audio removal", n)
	}
	if n := f.fake.CallCount(tencentim.APISendGroupMsg); n != 1 {
		t.Fatalf("%d group messages, want the removal's one", n)
	}
}
