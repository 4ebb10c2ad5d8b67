package room_test

import (
	"fmt"
	"reflect"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func banUser(op, target string, secs int64, opts ...opt) room.Command {
	return cmd(room.CmdBanUser, op, append([]opt{withTarget(target), ban(secs)}, opts...)...)
}
func targets(ids ...string) opt { return func(c *room.Command) { c.TargetUserIDs = ids } }

// batch names users x<from>..x<to-1>.
func batch(from, to int) []string {
	var ids []string
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("x%02d", i))
	}
	return ids
}

func bannedEvents(op string, secs int64, users ...string) []room.Event {
	var evs []room.Event
	for _, u := range users {
		evs = append(evs, room.RoomUserBanned{TargetUserID: u, OperatorUserID: op, BanUntilMs: t0 + secs*1000, AtMs: t0})
	}
	return evs
}

func unbanUser(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdUnbanUser, op, append([]opt{withTarget(target)}, opts...)...)
}
func muteMember(op, target string, secs int64, opts ...opt) room.Command {
	return cmd(room.CmdMuteMember, op, append([]opt{withTarget(target), func(c *room.Command) { c.MuteSeconds = secs }}, opts...)...)
}
func unmuteMember(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdUnmuteMember, op, append([]opt{withTarget(target)}, opts...)...)
}

func moderationRules() []rule {
	manyMuted := then(aRoom)
	for i := range room.MaxMutes {
		u := fmt.Sprintf("m%04d", i)
		manyMuted = then(manyMuted, join(u), muteMember("owner", u, 60))
	}
	return []rule{
		{name: "mute member: the room's mute list is full", given: manyMuted, cmd: muteMember("owner", "alice", 30), err: room.ErrTooManyMutes, class: errclass.Precondition},
		// BanUser
		{name: "ban: someone outside the room", given: aRoom, cmd: banUser("admin", "carol", 60, reason("spam")),
			want: []room.Event{room.RoomUserBanned{TargetUserID: "carol", OperatorUserID: "admin", Reason: "spam", BanUntilMs: t0 + 60_000, AtMs: t0}}},
		{name: "ban: a member is taken out as by a kick with the ban", given: then(aRoom, takeMic("alice", 2)), cmd: banUser("owner", "alice", 60),
			want: []room.Event{released("alice", 2, room.ReasonKicked), room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", BanUntilMs: t0 + 60_000}}},
		{name: "ban: the banned cannot join", given: then(aRoom, banUser("owner", "carol", 60)), cmd: join("carol", at(t0+59_999)), err: room.ErrBanned, class: errclass.Precondition},
		{name: "ban: nobody bans the owner", given: aRoom, cmd: banUser("admin", "owner", 60), err: room.ErrKickOwner, class: errclass.Precondition},
		{name: "ban: an admin may not ban an admin", given: aRoom, cmd: banUser("admin", "admin2", 60), err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "ban: a member may not", given: aRoom, cmd: banUser("alice", "carol", 60), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("ban: no duration", aRoom, banUser("owner", "carol", 0), "ban_seconds"),
		invalid("ban: too long", aRoom, banUser("owner", "carol", room.MaxBanSeconds+1), "ban_seconds"),
		invalid("ban: oneself", aRoom, banUser("owner", "owner", 60), "target_user_id"),
		// A batch: one event per target, in the order given, repeats once.
		{name: "ban: a batch bans each target once, members taken out", given: then(aRoom, takeMic("alice", 2)),
			cmd: banUser("admin", "carol", 60, reason("raid"), targets("alice", "dave", "carol")),
			want: []room.Event{
				room.RoomUserBanned{TargetUserID: "carol", OperatorUserID: "admin", Reason: "raid", BanUntilMs: t0 + 60_000, AtMs: t0},
				released("alice", 2, room.ReasonKicked),
				room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "admin", Reason: "raid", BanUntilMs: t0 + 60_000},
				room.RoomUserBanned{TargetUserID: "dave", OperatorUserID: "admin", Reason: "raid", BanUntilMs: t0 + 60_000, AtMs: t0},
			}},
		{name: "ban: target_user_ids alone", given: aRoom, cmd: banUser("owner", "", 60, targets("carol")),
			want: []room.Event{room.RoomUserBanned{TargetUserID: "carol", OperatorUserID: "owner", BanUntilMs: t0 + 60_000, AtMs: t0}}},
		{name: "ban: one target refused refuses the batch (the owner)", given: aRoom, cmd: banUser("admin", "carol", 60, targets("dave", "owner")),
			err: room.ErrKickOwner, class: errclass.Precondition},
		{name: "ban: one target refused refuses the batch (an admin, by an admin)", given: aRoom, cmd: banUser("admin", "carol", 60, targets("admin2")),
			err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "ban: 20 targets at once", given: aRoom, cmd: banUser("owner", "x00", 60, targets(batch(1, room.MaxBanTargets)...)),
			want: bannedEvents("owner", 60, batch(0, room.MaxBanTargets)...)},
		invalid("ban: 21 targets", aRoom, banUser("owner", "x00", 60, targets(batch(1, room.MaxBanTargets+1)...)), "at most 20 targets"),
		invalid("ban: 21 in target_user_ids alone", aRoom, banUser("owner", "", 60, targets(batch(0, room.MaxBanTargets+1)...)), "at most 20 targets"),
		invalid("ban: a bad id in the batch", aRoom, banUser("owner", "carol", 60, targets("dave", "a b")), "target_user_ids[1]"),
		invalid("ban: oneself in the batch", aRoom, banUser("admin", "carol", 60, targets("admin")), "target_user_ids[0]"),
		invalid("ban: no target at all", aRoom, banUser("owner", "", 60), "target_user_id"),

		// UnbanUser
		{name: "unban: lifts a ban", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("admin", "carol"),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "admin"}}},
		{name: "unban: then the user joins", given: then(aRoom, banUser("owner", "carol", 60), unbanUser("admin", "carol")), cmd: join("carol"),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "unban: no ban in force is a no-op", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("admin", "carol", at(t0+60_000))},
		{name: "unban: a member may not", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("alice", "carol"), err: room.ErrNotOwner, class: errclass.Permission},

		// MuteMember / UnmuteMember
		{name: "mute member: an admin mutes a member's chat", given: aRoom, cmd: muteMember("admin", "alice", 30),
			want: []room.Event{room.RoomMemberMuted{TargetUserID: "alice", OperatorUserID: "admin", MutedUntilMs: t0 + 30_000, AtMs: t0}}},
		{name: "mute member: not a member", given: aRoom, cmd: muteMember("admin", "carol", 30), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "mute member: an admin may not mute an admin", given: aRoom, cmd: muteMember("admin", "admin2", 30), err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "mute member: nobody mutes the owner", given: aRoom, cmd: muteMember("admin", "owner", 30), err: room.ErrKickOwner, class: errclass.Precondition},
		invalid("mute member: no duration", aRoom, muteMember("owner", "alice", 0), "mute_seconds"),
		invalid("mute member: too long", aRoom, muteMember("owner", "alice", room.MaxMuteSeconds+1), "mute_seconds"),
		{name: "unmute member: lifts it", given: then(aRoom, muteMember("owner", "alice", 30)), cmd: unmuteMember("admin", "alice"),
			want: []room.Event{room.RoomMemberUnmuted{TargetUserID: "alice", OperatorUserID: "admin"}}},
		{name: "unmute member: over already is a no-op", given: then(aRoom, muteMember("owner", "alice", 30)), cmd: unmuteMember("admin", "alice", at(t0+30_000))},
	}
}

// A mute outlives leaving and joining again; the room view lists it.
func TestMuteOutlivesRejoin(t *testing.T) {
	s := given(t, then(aRoom, muteMember("owner", "alice", 30), leave("alice"), join("alice", at(t0+10)))...)
	if !s.MutedAt("alice", t0+29_999) || s.MutedAt("alice", t0+30_000) {
		t.Fatalf("mute after rejoin: %v", room.View(s).MutedMembers)
	}
	if v := room.View(s).MutedMembers; len(v) != 1 || v[0].UserId != "alice" || v[0].MutedUntilMs != t0+30_000 {
		t.Fatalf("view %v", v)
	}
}

// The ban list shows who banned and why, for bans and kicks with a ban
// alike; a lifted ban takes its note with it.
func TestBansShowReasonAndOperator(t *testing.T) {
	s := given(t, then(aRoom, banUser("admin", "carol", 60, reason("spam"), targets("dave")),
		kick("owner", "alice", ban(60), reason("rude")), unbanUser("owner", "dave"))...)
	bans, _ := room.BansPage(s, t0, room.MembersPage{Size: 10})
	got := map[string][2]string{}
	for _, b := range bans {
		got[b.UserId] = [2]string{b.Reason, b.OperatorUserId}
	}
	want := map[string][2]string{"alice": {"rude", "owner"}, "carol": {"spam", "admin"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("bans %v, want %v", got, want)
	}
	if n := room.BanNoteCount(s); n != 2 {
		t.Fatalf("%d notes kept, want 2 (dave's went with the unban)", n)
	}
	// carol joins once her ban is over: her note goes with the ban.
	s = given(t, then(aRoom, banUser("admin", "carol", 60, reason("spam")), join("carol", at(t0+60_000)))...)
	if n := room.BanNoteCount(s); n != 0 || len(s.Bans) != 0 {
		t.Fatalf("after the ban ended and carol joined: %d notes, bans %v", n, s.Bans)
	}
}

// The ban list pages the bans in force by user id.
func TestBansPage(t *testing.T) {
	s := given(t, then(aRoom, banUser("owner", "d", 60), banUser("owner", "b", 60), banUser("owner", "c", 1), banUser("owner", "a", 60))...)
	var got []string
	p := room.MembersPage{Size: 2}
	for range 5 {
		bans, next := room.BansPage(s, t0+1000, p) // c's ban is over
		for _, b := range bans {
			got = append(got, b.UserId)
		}
		if next == "" {
			break
		}
		tok, _ := room.ParseBansPage(&v1.ListBansRequest{PageToken: next, PageSize: 2})
		p = tok
	}
	if want := []string{"a", "b", "d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
}
