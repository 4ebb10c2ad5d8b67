package roomgrain

import (
	"errors"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// The grain answers a join ticket's rights from the room as it is, as a
// read: nothing is logged (the seq does not move), and each change of
// seat, seat mute, seat lock, kick and ban shows in the next answer.
func TestJoinTicketRightsFollowTheRoom(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "alice"))
	ticket := func(user string) (*v1.JoinRights, int64, error) {
		r, err := f.do(pid, wrap(&v1.GetJoinTicketRequest{AppCode: "app", RoomId: "r1", UserId: user}))
		if err != nil {
			return nil, 0, err
		}
		return r.GetJoinRights(), r.GetRoomSeq(), nil
	}
	want := func(step, user string, send bool, seat int32) {
		t.Helper()
		r, _, err := ticket(user)
		if err != nil || r.GetSendAudio() != send || r.GetSeat() != seat {
			t.Fatalf("%s: %s rights %v (%v), want send=%v seat=%d", step, user, r, err, send, seat)
		}
	}
	refused := func(step, user string, code error) {
		t.Helper()
		if _, _, err := ticket(user); !errors.Is(err, code) {
			t.Fatalf("%s: %s got %v, want %v", step, user, err, code)
		}
	}
	want("member", "alice", false, -1)
	refused("stranger", "mallory", room.ErrNotMember)
	_, seqBefore, _ := ticket("alice")
	_, seqAfter, _ := ticket("alice")
	if seqBefore != seqAfter {
		t.Fatalf("a ticket moved the seq %d -> %d", seqBefore, seqAfter)
	}
	f.mustDo(pid, wrap(&v1.TakeMicRequest{CommandId: "c3", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: 2}))
	want("seated", "alice", true, 2)
	f.mustDo(pid, wrap(&v1.MuteSeatRequest{CommandId: "c4", AppCode: "app", RoomId: "r1", UserId: "owner", Seat: 2}))
	want("seat muted", "alice", false, 2)
	f.mustDo(pid, wrap(&v1.UnmuteSeatRequest{CommandId: "c5", AppCode: "app", RoomId: "r1", UserId: "owner", Seat: 2}))
	want("seat unmuted", "alice", true, 2)
	f.mustDo(pid, wrap(&v1.LockSeatRequest{CommandId: "c6", AppCode: "app", RoomId: "r1", UserId: "owner", Seat: 2}))
	want("seat locked (taken off it)", "alice", false, -1)
	f.mustDo(pid, wrap(&v1.KickUserRequest{CommandId: "c7", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice", BanSeconds: 600}))
	refused("kicked with a ban", "alice", room.ErrBanned)
	f.mustDo(pid, wrap(&v1.UnbanUserRequest{CommandId: "c8", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice"}))
	refused("unbanned, not back in", "alice", room.ErrNotMember)
	f.mustDo(pid, wrap(&v1.CloseRoomRequest{CommandId: "c9", AppCode: "app", RoomId: "r1", UserId: "owner"}))
	refused("closed", "owner", room.ErrRoomClosed)
}
