package roomim_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/room"
)

// Bans reach IM both ways on an AVChatRoom: a user banned while not in
// the room cannot enter the group (nor stay in the audio room); after a
// kick with a ban, an unban lets the user enter the group again and
// receive its next messages; a ban already over sets nothing.
func TestBansReachIMBothWays(t *testing.T) {
	ctx := ctxT(t)
	now := time.Now()
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient), roomim.WithClock(func() time.Time { return now }))
	gid := roomim.GroupID("lalu", "bans")
	if err := f.pub.EnsureGroup(ctx, "lalu", "bans", "host", "bans"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "lurker") // entered the audio room with a bare UserSig
	seq := int64(1)
	publish := func(ev room.Event) string {
		t.Helper()
		seq++
		env := envelope(t, "lalu", "bans", seq, ev)
		if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
			t.Fatal(err)
		}
		return env.EventID
	}
	// A non-member banned: refused by the group, out of the audio room.
	publish(room.RoomUserBanned{TargetUserID: "lurker", OperatorUserID: "host", Reason: "spam", BanUntilMs: now.Add(time.Hour).UnixMilli()})
	if err := f.fake.EnterGroup(gid, "lurker"); !errors.Is(err, imfake.ErrBanned) {
		t.Fatalf("banned non-member entering the group: %v", err)
	}
	if tfake.InRoom(gid, "lurker") {
		t.Fatal("banned non-member still in the audio room")
	}
	// A member kicked with a ban, then unbanned: back in, and hears.
	if err := f.fake.EnterGroup(gid, "bad"); err != nil {
		t.Fatal(err)
	}
	publish(room.RoomUserKicked{TargetUserID: "bad", OperatorUserID: "host", BanUntilMs: now.Add(time.Hour).UnixMilli()})
	if err := f.fake.EnterGroup(gid, "bad"); !errors.Is(err, imfake.ErrBanned) {
		t.Fatalf("kicked with a ban, entering: %v", err)
	}
	publish(room.RoomUserUnbanned{TargetUserID: "bad", OperatorUserID: "host"})
	if _, banned := f.fake.BannedUntil(gid, "bad"); banned {
		t.Fatal("unbanned user still banned in the group")
	}
	if err := f.fake.EnterGroup(gid, "bad"); err != nil {
		t.Fatalf("unbanned user entering the group: %v", err)
	}
	later := publish(room.RoomMicTaken{UserID: "host", Seat: 0})
	recv := f.fake.Received(gid, "bad")
	if !slices.ContainsFunc(recv, func(m imfake.Message) bool { return slices.Contains(m.EventIDs, later) }) {
		t.Fatalf("the unbanned user did not receive the next message: %v", recv)
	}
	// The unban of a user never banned in IM, and a ban already over, are
	// both quiet successes.
	publish(room.RoomUserUnbanned{TargetUserID: "never", OperatorUserID: "host"})
	publish(room.RoomUserBanned{TargetUserID: "past", OperatorUserID: "host", BanUntilMs: now.Add(-time.Second).UnixMilli()})
	if err := f.fake.EnterGroup(gid, "past"); err != nil {
		t.Fatalf("a ban already over still refuses: %v", err)
	}
}

// With ticket enforcement, a seat muted under a user and a user taken off
// a seat leave the audio room (to re-enter with their new rights); a
// user who releases their own seat stays, and without enforcement nobody
// is removed for a seat.
func TestShrinkingRightsLeaveTheAudioRoom(t *testing.T) {
	for _, enforce := range []bool{true, false} {
		ctx := ctxT(t)
		tfake, tclient := audio(t)
		opts := []roomim.Option{roomim.WithAudio(tclient)}
		if enforce {
			opts = append(opts, roomim.WithTicketEnforcement())
		}
		f := setup(t, nil, opts...)
		gid := roomim.GroupID("lalu", "seats")
		if err := f.pub.EnsureGroup(ctx, "lalu", "seats", "host", "seats"); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"muted", "kicked", "locked", "leaver"} {
			tfake.EnterRoom(gid, u)
		}
		for i, ev := range []room.Event{
			room.RoomSeatMuted{Seat: 1, UserID: "muted", OperatorUserID: "host"},
			room.RoomMicReleased{UserID: "kicked", Seat: 2, Reason: room.ReasonKickedOffSeat},
			room.RoomMicReleased{UserID: "locked", Seat: 3, Reason: room.ReasonSeatLocked},
			room.RoomMicReleased{UserID: "leaver", Seat: 4, Reason: room.ReasonReleased},
		} {
			if err := f.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "seats", int64(i+2), ev)); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range []string{"muted", "kicked", "locked"} {
			if tfake.InRoom(gid, u) == enforce {
				t.Fatalf("enforce=%v: %s in the audio room: %v", enforce, u, tfake.InRoom(gid, u))
			}
		}
		if !tfake.InRoom(gid, "leaver") {
			t.Fatalf("enforce=%v: a user who released their own seat was removed", enforce)
		}
	}
}

// A user whose rights shrink while they hold a ticket (kicked, banned,
// taken off their seat, their seat muted) is out of the permission-
// controlled audio room within a second of the event's delivery, and a
// ticket issued from their new rights (a listener's) cannot publish.
func TestRevokedTicketHolderRemovedWithinASecond(t *testing.T) {
	ctx := ctxT(t)
	tfake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet), trtcfake.WithAdvancedPermission())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tfake.Close() })
	cfg := tfake.ClientConfig()
	tclient, err := trtc.New(cfg, trtc.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	tickets, err := trtc.NewTickets(trtc.TicketConfig{SDKAppID: cfg.SDKAppID, SigKey: cfg.SigKey, TTL: cfg.TicketTTL, UserSigTTL: cfg.UserSigTTL})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, nil, roomim.WithAudio(tclient), roomim.WithTicketEnforcement())
	gid := roomim.GroupID("lalu", "revoke")
	if err := f.pub.EnsureGroup(ctx, "lalu", "revoke", "host", "revoke"); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UnixMilli()
	for i, c := range []struct {
		user string
		ev   room.Event
	}{
		{"kicked", room.RoomUserKicked{TargetUserID: "kicked", OperatorUserID: "host", BanUntilMs: until}},
		{"banned", room.RoomUserBanned{TargetUserID: "banned", OperatorUserID: "host", BanUntilMs: until}},
		{"unseated", room.RoomMicReleased{UserID: "unseated", Seat: 1, Reason: room.ReasonKickedOffSeat}},
		{"muted", room.RoomSeatMuted{Seat: 2, UserID: "muted", OperatorUserID: "host"}},
	} {
		old, err := tickets.Issue(c.user, gid, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := tfake.Join(gid, c.user, old.UserSig, old.PrivateMapKey); err != nil {
			t.Fatal(err)
		}
		if err := tfake.StartAudio(gid, c.user); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		if err := f.pub.PublishRoomEvent(ctx, envelope(t, "lalu", "revoke", int64(i+2), c.ev)); err != nil {
			t.Fatal(err)
		}
		for tfake.InRoom(gid, c.user) && time.Since(at) < time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		if tfake.InRoom(gid, c.user) || tfake.Publishing(gid, c.user) {
			t.Fatalf("%s still in the audio room a second after the event", c.user)
		}
		fresh, _ := tickets.Issue(c.user, gid, false)
		if err := tfake.Join(gid, c.user, fresh.UserSig, fresh.PrivateMapKey); err != nil {
			t.Fatal(err)
		}
		if err := tfake.StartAudio(gid, c.user); !errors.Is(err, trtcfake.ErrNoPermission) {
			t.Fatalf("%s publishing on a listener's ticket: %v", c.user, err)
		}
	}
}
