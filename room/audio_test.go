package room_test

import (
	"errors"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"reflect"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

const grace = int64(10_000)

// audio is the callback endpoint's command: user's kind at event time ms.
func audio(user, kind string, ms int64, opts ...opt) room.Command {
	return cmd(room.CmdAudioPresence, user, append([]opt{func(c *room.Command) {
		c.AudioKind, c.EventTimeMs, c.SeatGraceMs, c.CommandID = kind, ms, grace, "trtc-"+kind+"-"+user
	}}, opts...)...)
}

func seen(user, kind string, ms, releaseAt int64) room.Event {
	return room.RoomAudioSeen{UserID: user, Kind: kind, EventMs: ms, ReleaseAtMs: releaseAt}
}

func removed(user, reason, kind string) room.Event {
	return room.RoomAudioRemoved{UserID: user, Reason: reason, Kind: kind}
}

func audioRules() []rule {
	seated := then(aRoom, takeMic("alice", 2))
	out := then(seated, audio("alice", room.AudioExit, t0+100))
	return []rule{
		{name: "audio: a member enters", given: aRoom, cmd: audio("bob", room.AudioEnter, t0+1),
			want: []room.Event{seen("bob", room.AudioEnter, t0+1, 0)}},
		{name: "audio: a seated member's exit starts the seat's grace from the event time", given: seated, cmd: audio("alice", room.AudioExit, t0+100),
			want: []room.Event{seen("alice", room.AudioExit, t0+100, t0+100+grace)}},
		{name: "audio: an unseated member's exit is only kept", given: aRoom, cmd: audio("bob", room.AudioExit, t0+100),
			want: []room.Event{seen("bob", room.AudioExit, t0+100, 0)}},
		{name: "audio: a re-enter within the grace cancels it", given: out, cmd: audio("alice", room.AudioEnter, t0+200),
			want: []room.Event{seen("alice", room.AudioEnter, t0+200, 0)}},
		{name: "audio: an enter older than the exit kept is ignored (reordered)", given: out, cmd: audio("alice", room.AudioEnter, t0+99)},
		{name: "audio: the same event time again is ignored (a retry)", given: out, cmd: audio("alice", room.AudioExit, t0+100)},
		{name: "audio: an enter in the exit's millisecond is ignored", given: out, cmd: audio("alice", room.AudioEnter, t0+100)},
		{name: "audio: an exit in the enter's millisecond counts as the later", given: then(seated, audio("alice", room.AudioEnter, t0+100)), cmd: audio("alice", room.AudioExit, t0+100),
			want: []room.Event{seen("alice", room.AudioExit, t0+100, t0+100+grace)}},
		{name: "audio: the grace's end releases the seat", given: out, cmd: expire(at(t0 + 100 + grace)),
			want: []room.Event{released("alice", 2, room.ReasonAudioLeft)}},
		{name: "audio: before the grace's end nothing is released", given: out, cmd: expire(at(t0 + 99 + grace))},
		{name: "audio: a late exit whose grace is over is released at the next deadline", given: then(seated, audio("alice", room.AudioExit, t0-60_000)),
			cmd: expire(at(t0)), want: []room.Event{released("alice", 2, room.ReasonAudioLeft)}},
		{name: "audio: a seat released by hand ends the grace", given: then(out, releaseMic("alice")), cmd: expire(at(t0 + 100 + grace))},
		{name: "audio: a move keeps the grace with the user", given: then(out, moveSeat("alice", 5)), cmd: expire(at(t0 + 100 + grace)),
			want: []room.Event{released("alice", 5, room.ReasonAudioLeft)}},
		{name: "audio: a leave ends the grace", given: then(out, leave("alice")), cmd: expire(at(t0 + 100 + grace))},
		{name: "audio: an exit of a non-member is ignored", given: aRoom, cmd: audio("carol", room.AudioExit, t0+1)},
		{name: "audio: a non-member's enter removes them", given: aRoom, cmd: audio("carol", room.AudioEnter, t0+1),
			want: []room.Event{removed("carol", room.AudioRemovedNotMember, room.AudioEnter)}},
		{name: "audio: a banned user's enter removes them", given: then(aRoom, kick("owner", "bob", ban(60))), cmd: audio("bob", room.AudioEnter, t0+1),
			want: []room.Event{removed("bob", room.AudioRemovedBanned, room.AudioEnter)}},
		{name: "audio: publishing without a seat removes the member", given: aRoom, cmd: audio("bob", room.AudioStart, t0+1),
			want: []room.Event{removed("bob", room.AudioRemovedNoSeat, room.AudioStart)}},
		{name: "audio: publishing on a muted seat removes the member", given: then(seated, muteSeat("owner", 2)), cmd: audio("alice", room.AudioStart, t0+1),
			want: []room.Event{removed("alice", room.AudioRemovedSeatMuted, room.AudioStart)}},
		{name: "audio: publishing by a non-member removes them", given: aRoom, cmd: audio("carol", room.AudioStart, t0+1),
			want: []room.Event{removed("carol", room.AudioRemovedNotMember, room.AudioStart)}},
		{name: "audio: publishing on one's own open seat is fine", given: seated, cmd: audio("alice", room.AudioStart, t0+1)},
		{name: "audio: a dismiss of an open room is kept", given: aRoom, cmd: audio("trtc", room.AudioDismiss, t0+1),
			want: []room.Event{room.RoomAudioDismissed{EventMs: t0 + 1}}},
		{name: "audio: a dismiss of a closed room is refused", given: aClosed, cmd: audio("trtc", room.AudioDismiss, t0+1), err: room.ErrRoomClosed, class: errclass.Precondition},
		invalid("audio: unknown kind", aRoom, audio("bob", "dance", t0), "kind"),
		invalid("audio: no event time", aRoom, audio("bob", room.AudioEnter, 0), "event_time_ms"),
		invalid("audio: grace too long", aRoom, audio("bob", room.AudioExit, t0, set(func(c *room.Command) { c.SeatGraceMs = room.MaxSeatGraceMs + 1 })), "seat_grace_ms"),
	}
}

// A seat's grace is a deadline of the room: NextSeatDeadline names it, so
// the room's timer fires for it, and a snapshot keeps it.
func TestAudioGraceIsARoomDeadline(t *testing.T) {
	s := given(t, then(aRoom, takeMic("alice", 2), audio("alice", room.AudioExit, t0+100))...)
	if got := s.NextSeatDeadline(); got != t0+100+grace {
		t.Fatalf("NextSeatDeadline = %d, want %d", got, t0+100+grace)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := room.UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("snapshot lost the audio marks:\n%#v\n%#v", back, s)
	}
	s = given(t, then(aRoom, takeMic("alice", 2), audio("alice", room.AudioExit, t0+100), audio("alice", room.AudioEnter, t0+101))...)
	if got := s.NextSeatDeadline(); got != 0 {
		t.Fatalf("after the re-enter NextSeatDeadline = %d, want none", got)
	}
}

// A client may not send the room's audio command, nor spend its ids or
// its release reason.
func TestAudioPresenceIsTheRoomsOwn(t *testing.T) {
	if _, ok := room.SystemIDPrefix("trtc-103-x"); !ok {
		t.Fatal("trtc- command ids are not reserved")
	}
}

func TestAudioPresenceRefusedFromClients(t *testing.T) {
	rc := &v1.RoomCommand{Command: &v1.RoomCommand_AudioPresence{AudioPresence: &v1.AudioPresenceRequest{
		CommandId: "c1", AppCode: tApp, RoomId: tRoom, UserId: "alice", Kind: room.AudioExit, EventTimeMs: t0}}}
	if err := room.CheckClientCommand(rc); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("a client's AudioPresence: %v, want Invalid", err)
	}
	lv := &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: "c2", AppCode: tApp, RoomId: tRoom, UserId: "alice", Reason: room.ReasonAudioLeft}}}
	if err := room.CheckClientCommand(lv); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("a client's leave claiming %s: %v, want Invalid", room.ReasonAudioLeft, err)
	}
}
