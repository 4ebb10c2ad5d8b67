package room_test

import (
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func reopen(user string, opts ...opt) room.Command { return cmd(room.CmdReopenRoom, user, opts...) }

func lifecycleRules() []rule {
	reopened := room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: room.DefaultMicSeats,
		AdminUserIDs: []string{"admin", "admin2"}, CreatedAtMs: t0 + 9, Reopened: true}
	renamed := reopened
	renamed.Name = "Saturday"
	return []rule{
		{name: "reopen: the owner opens the closed room again", given: aClosed, cmd: reopen("owner", at(t0+9)),
			want: []room.Event{reopened, room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0 + 9}}},
		{name: "reopen: under a new name", given: aClosed, cmd: reopen("owner", at(t0+9), named("Saturday")),
			want: []room.Event{renamed, room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0 + 9}}},
		{name: "reopen: an admin may not", given: aClosed, cmd: reopen("admin"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "reopen: the owner the room was handed to", given: then(aRoom, transferOwner("owner", "alice"), closeRoom("alice")),
			cmd: reopen("owner"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "reopen: an open room is a no-op", given: aRoom, cmd: reopen("owner")},
		{name: "reopen: commands are taken again", given: then(aClosed, reopen("owner")), cmd: join("alice"),
			want: []room.Event{room.RoomUserJoined{UserID: "alice", JoinedAtMs: t0}}},
		{name: "reopen: a ban outlives the close", given: then(aRoom, banUser("owner", "carol", 60), closeRoom("owner"), reopen("owner")),
			cmd: join("carol", at(t0+59_999)), err: room.ErrBanned, class: errclass.Precondition},
		{name: "reopen: create is still refused", given: then(aClosed, reopen("owner")), cmd: create("owner"), err: room.ErrRoomExists, class: errclass.Exists},
		invalid("reopen: blank name", aClosed, reopen("owner", named(" ")), "name"),
	}
}

// A reopened room is the closed one, open again: the same seq line, its
// heat, bans, mutes, admins and seat settings; nobody but the owner in it.
func TestReopenKeepsTheRoom(t *testing.T) {
	closed := given(t, then(aRoom, gift("alice", "bob", 1, 70), banUser("owner", "carol", 60), muteMember("owner", "alice", 60),
		lockSeat("owner", 3), muteSeat("owner", 4), closeRoom("owner"))...)
	s := given(t, then(aRoom, gift("alice", "bob", 1, 70), banUser("owner", "carol", 60), muteMember("owner", "alice", 60),
		lockSeat("owner", 3), muteSeat("owner", 4), closeRoom("owner"), reopen("owner", at(t0+5)))...)
	if s.Seq != closed.Seq+1 || s.Status != room.StatusOpen {
		t.Fatalf("seq %d status %s, want seq %d open", s.Seq, s.Status, closed.Seq+1)
	}
	if s.Heat != 70 || !s.BannedAt("carol", t0+5) || !s.MutedAt("alice", t0+5) || !s.SeatLocked(3) || !s.SeatMuted(4) ||
		len(s.Seats) != room.DefaultMicSeats || len(s.Admins) != 2 || s.Owner != "owner" || s.CreatedAtMs != t0+5 {
		t.Fatalf("reopened room lost something: %+v", s)
	}
	if got := s.SortedMembers(); len(got) != 1 || got[0] != "owner" {
		t.Fatalf("members %v, want the owner alone", got)
	}
}
