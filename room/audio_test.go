package room_test

import (
	"errors"

	"reflect"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"

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

const stale = int64(60_000) // presence.stale_after

// im is IM's State.StateChange as the callback endpoint sends it when IM
// is the presence source: online (Login) or offline (Logout, Disconnect).
func im(user, kind string, ms int64, opts ...opt) room.Command {
	return audio(user, kind, ms, append([]opt{set(func(c *room.Command) { c.LeaveAfterMs, c.CommandID = stale, "trtc-im-"+kind+"-"+user })}, opts...)...)
}

// onSource marks a TRTC report as the presence source's.
var onSource = set(func(c *room.Command) { c.LeaveAfterMs = stale })

func imSeen(user, kind string, ms, leaveAt int64) room.Event {
	return room.RoomAudioSeen{UserID: user, Kind: kind, EventMs: ms, LeaveAtMs: leaveAt}
}

func timedOut(user string) room.Event {
	return room.RoomUserLeft{UserID: user, Reason: room.ReasonHeartbeatTimeout}
}

// presenceRules: a presence source's offline member leaves stale_after
// after the report, through the room's deadline command, unless a newer
// online report comes; reports older than what the room keeps, or than
// the member's join, change nothing.
func presenceRules() []rule {
	off := then(aRoom, im("bob", room.PresenceOffline, t0+100))
	seatedOff := then(aRoom, takeMic("bob", 3), im("bob", room.PresenceOffline, t0+100))
	exited := then(aRoom, takeMic("bob", 3), audio("bob", room.AudioExit, t0+100, onSource))
	return []rule{
		{name: "presence: an offline member gets a leave deadline", given: aRoom, cmd: im("bob", room.PresenceOffline, t0+100),
			want: []room.Event{imSeen("bob", room.PresenceOffline, t0+100, t0+100+stale)}},
		{name: "presence: offline for stale_after leaves (heartbeat_timeout)", given: off, cmd: expire(at(t0 + 100 + stale)),
			want: []room.Event{timedOut("bob")}},
		{name: "presence: before stale_after nothing happens", given: off, cmd: expire(at(t0 + 99 + stale))},
		{name: "presence: a login within the window cancels", given: off, cmd: im("bob", room.PresenceOnline, t0+5000),
			want: []room.Event{imSeen("bob", room.PresenceOnline, t0+5000, 0)}},
		{name: "presence: after the login the deadline passes without a leave", given: then(off, im("bob", room.PresenceOnline, t0+5000)),
			cmd: expire(at(t0 + 100 + stale))},
		{name: "presence: an older logout after a newer login changes nothing", given: then(aRoom, im("bob", room.PresenceOnline, t0+200)),
			cmd: im("bob", room.PresenceOffline, t0+100)},
		{name: "presence: an older login after a newer logout changes nothing", given: off, cmd: im("bob", room.PresenceOnline, t0+99)},
		{name: "presence: the same logout again changes nothing (a duplicate)", given: off, cmd: im("bob", room.PresenceOffline, t0+100)},
		{name: "presence: a login in the logout's millisecond counts as the later", given: off, cmd: im("bob", room.PresenceOnline, t0+100),
			want: []room.Event{imSeen("bob", room.PresenceOnline, t0+100, 0)}},
		{name: "presence: a logout in the login's millisecond does not", given: then(aRoom, im("bob", room.PresenceOnline, t0+100)),
			cmd: im("bob", room.PresenceOffline, t0+100)},
		{name: "presence: a logout from before the join changes nothing", given: aRoom, cmd: im("bob", room.PresenceOffline, t0-1)},
		{name: "presence: a non-member's logout changes nothing", given: aRoom, cmd: im("carol", room.PresenceOffline, t0+100)},
		{name: "presence: without the source's deadline an offline report is only kept", given: aRoom,
			cmd:  im("bob", room.PresenceOffline, t0+100, set(func(c *room.Command) { c.LeaveAfterMs = 0 })),
			want: []room.Event{imSeen("bob", room.PresenceOffline, t0+100, 0)}},
		{name: "presence: a seated member's leave releases the seat with the leave's reason", given: seatedOff, cmd: expire(at(t0 + 100 + stale)),
			want: []room.Event{released("bob", 3, room.ReasonHeartbeatTimeout), timedOut("bob")}},
		{name: "presence: a late logout whose window is over leaves at the next deadline", given: then(aRoom, join("dave", at(t0)), im("dave", room.PresenceOffline, t0+1)),
			cmd: expire(at(t0 + 1 + stale + 30_000)), want: []room.Event{timedOut("dave")}},
		{name: "presence: IM reports leave the audio marks alone", given: then(aRoom, takeMic("bob", 3), audio("bob", room.AudioExit, t0+50)),
			cmd: im("bob", room.PresenceOnline, t0+100), want: []room.Event{imSeen("bob", room.PresenceOnline, t0+100, 0)}},
		{name: "presence: trtc source: an exit sets the seat's grace and the leave", given: then(aRoom, takeMic("bob", 3)),
			cmd:  audio("bob", room.AudioExit, t0+100, onSource),
			want: []room.Event{room.RoomAudioSeen{UserID: "bob", Kind: room.AudioExit, EventMs: t0 + 100, ReleaseAtMs: t0 + 100 + grace, LeaveAtMs: t0 + 100 + stale}}},
		{name: "presence: trtc source: the grace frees the seat, the leave waits", given: exited, cmd: expire(at(t0 + 100 + grace)),
			want: []room.Event{released("bob", 3, room.ReasonAudioLeft)}},
		{name: "presence: trtc source: no re-enter within stale_after leaves", given: then(exited, expire(at(t0+100+grace))), cmd: expire(at(t0 + 100 + stale)),
			want: []room.Event{timedOut("bob")}},
		{name: "presence: trtc source: grace and leave due together release once", given: exited, cmd: expire(at(t0 + 100 + stale)),
			want: []room.Event{released("bob", 3, room.ReasonAudioLeft), timedOut("bob")}},
		{name: "presence: trtc source: a re-enter within stale_after cancels", given: then(exited, expire(at(t0+100+grace)), audio("bob", room.AudioEnter, t0+20_000)),
			cmd: expire(at(t0 + 100 + stale))},
		{name: "presence: trtc source: an exit from before the join sets no leave", given: aRoom, cmd: audio("bob", room.AudioExit, t0-1, onSource),
			want: []room.Event{seen("bob", room.AudioExit, t0-1, 0)}},
		invalid("presence: leave_after too long", aRoom, im("bob", room.PresenceOffline, t0, set(func(c *room.Command) { c.LeaveAfterMs = room.MaxLeaveAfterMs + 1 })), "leave_after_ms"),
		invalid("presence: leave_after negative", aRoom, im("bob", room.PresenceOffline, t0, set(func(c *room.Command) { c.LeaveAfterMs = -1 })), "leave_after_ms"),
	}
}

// An offline member's leave is a room deadline: NextSeatDeadline names
// it, a snapshot keeps it, and the member's leave drops the mark.
func TestPresenceLeaveIsARoomDeadline(t *testing.T) {
	s := given(t, then(aRoom, im("bob", room.PresenceOffline, t0+100))...)
	if got := s.NextSeatDeadline(); got != t0+100+stale {
		t.Fatalf("NextSeatDeadline = %d, want %d", got, t0+100+stale)
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
		t.Fatalf("snapshot lost the online marks:\n%#v\n%#v", back, s)
	}
	s = given(t, then(aRoom, im("bob", room.PresenceOffline, t0+100), leave("bob"))...)
	if got, marks := s.NextSeatDeadline(), s.OnlineMarks(); got != 0 || len(marks) != 0 {
		t.Fatalf("after the leave NextSeatDeadline = %d, marks %v, want none", got, marks)
	}
	s = given(t, then(aRoom, im("bob", room.PresenceOffline, t0+100), expire(at(t0+100+stale)))...)
	if s.IsMember("bob") || s.NextSeatDeadline() != 0 {
		t.Fatalf("after the deadline bob member %v, next deadline %d", s.IsMember("bob"), s.NextSeatDeadline())
	}
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
