package roomim_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
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
