package roomim_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/room"
)

// mutedFixture is a fake IM and a publisher sharing one clock the test
// moves.
func mutedFixture(t *testing.T, groupType string) (*imfake.Server, *roomim.Publisher, *atomic.Int64) {
	t.Helper()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet), imfake.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	cfg := fake.ClientConfig()
	cfg.GroupType = groupType
	client, err := tencentim.New(cfg, tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet), roomim.WithClock(now))
	t.Cleanup(pub.Close)
	return fake, pub, &clock
}

// TestChatMuteEnforcedInIM: a RoomMemberMuted mutes the member at IM
// (forbid_send_msg) for what is left of the room's mute, after its
// message; the member stays in the group. The mute holds until its end
// and not after; a RoomMemberUnmuted lifts it at once. Both on an
// AVChatRoom and on a group with a member list.
func TestChatMuteEnforcedInIM(t *testing.T) {
	for _, typ := range []string{"AVChatRoom", "Public"} {
		t.Run(typ, func(t *testing.T) {
			ctx := ctxT(t)
			fake, pub, clock := mutedFixture(t, typ)
			gid := roomim.GroupID("lalu", "m1")
			if err := pub.EnsureGroup(ctx, "lalu", "m1", "host", "m1"); err != nil {
				t.Fatal(err)
			}
			if err := fake.EnterGroup(gid, "loud"); err != nil {
				t.Fatal(err)
			}
			start := clock.Load()
			until := start + 60_000
			mute := envelope(t, "lalu", "m1", 5, room.RoomMemberMuted{TargetUserID: "loud", OperatorUserID: "host", MutedUntilMs: until, AtMs: start})
			if err := pub.PublishRoomEvent(ctx, mute); err != nil {
				t.Fatal(err)
			}
			end, muted := fake.MutedUntil(gid, "loud")
			if !muted || end.UnixMilli() != until {
				t.Fatalf("after the mute: muted %v until %v, want until %v", muted, end, time.UnixMilli(until))
			}
			if !fake.InGroup(gid, "loud") {
				t.Fatal("a muted member must stay in the group")
			}
			if got := apiOrder(fake, tencentim.APISendGroupMsg, tencentim.APIForbidSendMsg); len(got) != 2 || got[0] != tencentim.APISendGroupMsg {
				t.Fatalf("calls %v, want the mute message then forbid_send_msg", got)
			}
			clock.Add(59_000)
			if _, muted := fake.MutedUntil(gid, "loud"); !muted {
				t.Fatal("the IM mute ended before the room's")
			}
			clock.Add(1_000)
			if _, muted := fake.MutedUntil(gid, "loud"); muted {
				t.Fatal("the IM mute outlived the room's")
			}

			// Mute again, then unmute: the unmute clears it at IM.
			start = clock.Load()
			again := envelope(t, "lalu", "m1", 6, room.RoomMemberMuted{TargetUserID: "loud", OperatorUserID: "host", MutedUntilMs: start + 3_600_000, AtMs: start})
			unmute := envelope(t, "lalu", "m1", 7, room.RoomMemberUnmuted{TargetUserID: "loud", OperatorUserID: "host"})
			if err := pub.PublishRoomEvent(ctx, again); err != nil {
				t.Fatal(err)
			}
			if _, muted := fake.MutedUntil(gid, "loud"); !muted {
				t.Fatal("second mute not enforced")
			}
			if err := pub.PublishRoomEvent(ctx, unmute); err != nil {
				t.Fatal(err)
			}
			if _, muted := fake.MutedUntil(gid, "loud"); muted {
				t.Fatal("the unmute did not lift the IM mute")
			}
			if n := fake.CallCount(tencentim.APIForbidSendMsg); n != 3 {
				t.Fatalf("%d forbid_send_msg calls, want 3 (mute, mute, unmute)", n)
			}
		})
	}
}

// TestChatMuteRetryCountsFromNow: a mute delivered late (IM was down)
// is set at IM for what is left of it, not for its whole length, and a
// mute already over by then is a lift, not a new mute.
func TestChatMuteRetryCountsFromNow(t *testing.T) {
	ctx := ctxT(t)
	fake, pub, clock := mutedFixture(t, "AVChatRoom")
	gid := roomim.GroupID("lalu", "m2")
	if err := pub.EnsureGroup(ctx, "lalu", "m2", "host", "m2"); err != nil {
		t.Fatal(err)
	}
	start := clock.Load()
	clock.Add(40_000) // the event reaches IM 40 s after the room decided it
	late := envelope(t, "lalu", "m2", 3, room.RoomMemberMuted{TargetUserID: "u", MutedUntilMs: start + 60_000, AtMs: start})
	if err := pub.PublishRoomEvent(ctx, late); err != nil {
		t.Fatal(err)
	}
	if end, muted := fake.MutedUntil(gid, "u"); !muted || end.UnixMilli() != start+60_000 {
		t.Fatalf("late mute: muted %v until %v, want the room's end %v", muted, end, time.UnixMilli(start+60_000))
	}
	clock.Add(30_000) // past the room's end
	over := envelope(t, "lalu", "m2", 4, room.RoomMemberMuted{TargetUserID: "u", MutedUntilMs: start + 60_000, AtMs: start})
	over.EventID += "-again"
	if err := pub.PublishRoomEvent(ctx, over); err != nil {
		t.Fatal(err)
	}
	if _, muted := fake.MutedUntil(gid, "u"); muted {
		t.Fatal("a mute delivered after its end muted the member")
	}
}
