package roomim_test

import (
	"errors"
	"testing"

	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/room"
)

// TestRetryableEffectFailureHoldsBackLaterEvents: a kick whose audio step
// fails with an error TRTC may fix on a retry (it has a Permanent method
// that answers false) holds the room back like a failed send: an event
// enqueued after its result, by a sender that did not queue it behind the
// kick, is refused unsent instead of overtaking the kick's retry. Only a
// permanent failure (parked) releases the room.
func TestRetryableEffectFailureHoldsBackLaterEvents(t *testing.T) {
	ctx := ctxT(t)
	tfake, tclient := audio(t)
	f := setup(t, nil, roomim.WithAudio(tclient))
	gid := roomim.GroupID("lalu", "hb1")
	if err := f.pub.EnsureGroup(ctx, "lalu", "hb1", "host", "hb1"); err != nil {
		t.Fatal(err)
	}
	tfake.EnterRoom(gid, "bad")
	tfake.SetFailing("InternalError")
	kick := envelope(t, "lalu", "hb1", 5, room.RoomUserKicked{TargetUserID: "bad", OperatorUserID: "host"})
	err := f.pub.PublishRoomEvent(ctx, kick)
	if err == nil {
		t.Fatal("the kick succeeded while TRTC failed")
	}
	var perm interface{ Permanent() bool }
	if errors.As(err, &perm) && perm.Permanent() {
		t.Fatalf("a TRTC InternalError is permanent: %v", err)
	}
	after := envelope(t, "lalu", "hb1", 6, room.RoomMicTaken{UserID: "other", Seat: 1})
	if err := f.pub.PublishRoomEvent(ctx, after); !errors.Is(err, roomim.ErrHeldBack) {
		t.Fatalf("the event after the failed kick: %v, want ErrHeldBack", err)
	}
	for _, m := range f.fake.GroupMessages(gid) {
		for _, id := range m.EventIDs {
			if id == after.EventID {
				t.Fatalf("seq 6 was sent while the kick at seq 5 waits for its retry")
			}
		}
	}

	// The kick's retry, with TRTC back, releases the room.
	tfake.SetFailing("")
	if err := f.pub.PublishRoomEvent(ctx, kick); err != nil {
		t.Fatalf("the kick's retry: %v", err)
	}
	if err := f.pub.PublishRoomEvent(ctx, after); err != nil {
		t.Fatalf("seq 6 after the kick's retry: %v", err)
	}
	if tfake.InRoom(gid, "bad") {
		t.Fatal("the kicked user is still in the audio room")
	}
}
