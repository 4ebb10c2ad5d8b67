package room_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
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
	manyBanned := then(aRoom, join("carol"))
	for i := range room.MaxBans {
		manyBanned = append(manyBanned, banUser("admin", fmt.Sprintf("b%04d", i), 60))
	}
	return []rule{
		{name: "mute member: the room's mute list is full", given: manyMuted, cmd: muteMember("owner", "alice", 30), err: room.ErrTooManyMutes, class: errclass.Precondition},
		{name: "mute member: a full list still renews a mute in it", given: manyMuted, cmd: muteMember("owner", "m0007", 30),
			want: []room.Event{room.RoomMemberMuted{TargetUserID: "m0007", OperatorUserID: "owner", MutedUntilMs: t0 + 30_000, AtMs: t0}}},
		{name: "mute member: ended mutes are not counted", given: manyMuted, cmd: muteMember("owner", "alice", 30, at(t0+60_000)),
			want: []room.Event{room.RoomMemberMuted{TargetUserID: "alice", OperatorUserID: "owner", MutedUntilMs: t0 + 90_000, AtMs: t0 + 60_000}}},
		{name: "ban: the room's ban list is full", given: manyBanned, cmd: banUser("owner", "zed", 30), err: room.ErrTooManyBans, class: errclass.Precondition},
		{name: "kick: a ban past a full ban list is refused, the member stays", given: manyBanned, cmd: kick("owner", "carol", ban(30)), err: room.ErrTooManyBans, class: errclass.Precondition},
		{name: "unban: the owner's ban is the owner's to lift", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("admin", "carol"),
			err: room.ErrOutranked, class: errclass.Permission},
		{name: "unban: the owner lifts their own ban", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("owner", "carol"),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "owner"}}},
		{name: "unban: a new owner lifts the old owner's ban", given: then(aRoom, banUser("owner", "carol", 60), transferOwner("owner", "alice")), cmd: unbanUser("alice", "carol"),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "alice"}}},
		{name: "unban: the owner's kick-ban of an admin stays the owner's", given: then(aRoom, kick("owner", "admin", ban(60))), cmd: unbanUser("admin2", "admin"),
			err: room.ErrOutranked, class: errclass.Permission},
		{name: "unban: the owner lifts an admin's ban", given: then(aRoom, banUser("admin", "carol", 60)), cmd: unbanUser("owner", "carol"),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "owner"}}},
		{name: "unban: an ended owner's ban is cleared by an admin", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("admin", "carol", at(t0+60_000)),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "admin"}}},
		{name: "ban: an admin may not shorten the owner's ban", given: then(aRoom, banUser("owner", "carol", 3600)), cmd: banUser("admin", "carol", 1),
			err: room.ErrOutranked, class: errclass.Permission},
		{name: "ban: the owner bans an admin out of the room, who is no admin any more", given: then(aRoom, leave("admin")), cmd: banUser("owner", "admin", 60),
			want: []room.Event{room.RoomAdminRemoved{TargetUserID: "admin", OperatorUserID: "owner"},
				room.RoomUserBanned{TargetUserID: "admin", OperatorUserID: "owner", BanUntilMs: t0 + 60_000, AtMs: t0}}},
		{name: "unmute member: the owner's mute is the owner's to lift", given: then(aRoom, muteMember("owner", "alice", 30)), cmd: unmuteMember("admin", "alice"),
			err: room.ErrOutranked, class: errclass.Permission},
		{name: "mute member: an admin may not replace the owner's mute", given: then(aRoom, muteMember("owner", "alice", 3600)), cmd: muteMember("admin", "alice", 1),
			err: room.ErrOutranked, class: errclass.Permission},
		{name: "unmute member: no mute is a no-op", given: aRoom, cmd: unmuteMember("admin", "alice")},
		{name: "unmute member: an admin may not unmute an admin", given: then(aRoom, muteMember("owner", "admin2", 30)), cmd: unmuteMember("admin", "admin2"),
			err: room.ErrKickAdmin, class: errclass.Permission},
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
		{name: "unban: lifts an admin's ban", given: then(aRoom, banUser("admin2", "carol", 60)), cmd: unbanUser("admin", "carol"),
			want: []room.Event{room.RoomUserUnbanned{TargetUserID: "carol", OperatorUserID: "admin"}}},
		{name: "unban: then the user joins", given: then(aRoom, banUser("admin", "carol", 60), unbanUser("admin", "carol")), cmd: join("carol"),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "unban: no ban is a no-op", given: aRoom, cmd: unbanUser("admin", "carol")},
		{name: "unban: a member may not", given: then(aRoom, banUser("owner", "carol", 60)), cmd: unbanUser("alice", "carol"), err: room.ErrNotOwner, class: errclass.Permission},

		// MuteMember / UnmuteMember
		{name: "mute member: an admin mutes a member's chat", given: aRoom, cmd: muteMember("admin", "alice", 30),
			want: []room.Event{room.RoomMemberMuted{TargetUserID: "alice", OperatorUserID: "admin", MutedUntilMs: t0 + 30_000, AtMs: t0}}},
		{name: "mute member: not a member", given: aRoom, cmd: muteMember("admin", "carol", 30), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "mute member: an admin may not mute an admin", given: aRoom, cmd: muteMember("admin", "admin2", 30), err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "mute member: nobody mutes the owner", given: aRoom, cmd: muteMember("admin", "owner", 30), err: room.ErrKickOwner, class: errclass.Precondition},
		invalid("mute member: no duration", aRoom, muteMember("owner", "alice", 0), "mute_seconds"),
		invalid("mute member: too long", aRoom, muteMember("owner", "alice", room.MaxMuteSeconds+1), "mute_seconds"),
		{name: "unmute member: lifts an admin's mute", given: then(aRoom, muteMember("admin2", "alice", 30)), cmd: unmuteMember("admin", "alice"),
			want: []room.Event{room.RoomMemberUnmuted{TargetUserID: "alice", OperatorUserID: "admin"}}},
		{name: "unmute member: an ended mute's entry is cleared (the owner's too)", given: then(aRoom, muteMember("owner", "alice", 30)), cmd: unmuteMember("admin", "alice", at(t0+30_000)),
			want: []room.Event{room.RoomMemberUnmuted{TargetUserID: "alice", OperatorUserID: "admin"}}},
	}
}

// At the ban cap: a ban in the list is renewed, a kick without a ban
// goes through, and once the bans end their places are free again (the
// ended ones go with the next ban).
func TestFullBanList(t *testing.T) {
	cmds := then(aRoom, join("carol"))
	for i := range room.MaxBans {
		cmds = append(cmds, banUser("admin", fmt.Sprintf("b%04d", i), 60))
	}
	s := given(t, cmds...)
	if _, err := room.Decide(s, banUser("owner", "zed", 30)); !errors.Is(err, room.ErrTooManyBans) {
		t.Fatalf("ban past the cap: %v", err)
	}
	if evs, err := room.Decide(s, banUser("owner", "b0042", 30)); err != nil || len(evs) != 1 {
		t.Fatalf("renewing a ban in a full list: %v %v", evs, err)
	}
	batch := banUser("owner", "b0042", 30, func(c *room.Command) { c.TargetUserIDs = []string{"b0043", "zed"} })
	if _, err := room.Decide(s, batch); !errors.Is(err, room.ErrTooManyBans) {
		t.Fatalf("a batch with one new ban past the cap: %v", err)
	}
	batch.TargetUserIDs = []string{"b0043"}
	if evs, err := room.Decide(s, batch); err != nil || len(evs) != 2 {
		t.Fatalf("a batch renewing bans in a full list: %v %v", evs, err)
	}
	if evs, err := room.Decide(s, kick("owner", "carol")); err != nil || len(evs) != 1 {
		t.Fatalf("kick without a ban at the cap: %v %v", evs, err)
	}
	later := banUser("owner", "zed", 30, at(t0+60_000))
	evs, err := room.Decide(s, later)
	if err != nil {
		t.Fatalf("ban once the others ended: %v", err)
	}
	s.ApplyInPlace(s.Seq+1, evs)
	if len(s.Bans) != 1 || !s.BannedAt("zed", t0+60_000) || len(s.Extra.BanNotes) != 1 {
		t.Fatalf("ended bans stay: %d bans, %d imposers", len(s.Bans), len(s.Extra.BanNotes))
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

// A room with every list at its cap, ids and text at their longest, has a
// snapshot under 4 MiB: the bound the snapshot path is sized for
// (docs/client-protocol.md, "Rate limits and full rooms"). Built through
// Decide, as a room gets there.
func TestSnapshotAtTheCaps(t *testing.T) {
	id := func(prefix string, i int) string { return fmt.Sprintf("%s%0*d", prefix, room.MaxIDLen-len(prefix), i) }
	owner := id("o", 0)
	adminIDs := make([]string, room.MaxAdmins)
	for i := range adminIDs {
		adminIDs[i] = id("a", i)
	}
	cmds := []room.Command{cmd(room.CmdCreateRoom, owner, named(strings.Repeat("n", room.MaxNameLen)), seats(room.MaxMicSeats), admins(adminIDs...))}
	ann := strings.Repeat("x", room.MaxAnnouncement)
	cmds = append(cmds, cmd(room.CmdUpdateRoom, owner, func(c *room.Command) { c.Announcement = &ann }))
	for i := range room.MaxMutes {
		u := id("m", i)
		cmds = append(cmds, join(u), muteMember(owner, u, room.MaxMuteSeconds), leave(u))
	}
	for i := range room.MaxBans {
		cmds = append(cmds, banUser(owner, id("b", i), room.MaxBanSeconds, reason(strings.Repeat("r", room.MaxReasonLen))))
	}
	s := given(t, cmds...)
	if len(s.Bans) != room.MaxBans || len(room.View(s).MutedMembers) != room.MaxMutes {
		t.Fatalf("%d bans, %d mutes", len(s.Bans), len(room.View(s).MutedMembers))
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot at the caps: %d bytes (%d bans, %d mutes, %d admins)", len(b), room.MaxBans, room.MaxMutes, room.MaxAdmins)
	if len(b) > 4<<20 {
		t.Fatalf("snapshot at the caps is %d bytes, over 4 MiB", len(b))
	}
	// At the caps the room still takes what shrinks it or does not grow
	// the lists, and refuses the growth with its code.
	if _, err := room.Decide(s, banUser(owner, "newcomer", 60)); !errors.Is(err, room.ErrTooManyBans) {
		t.Fatalf("ban past the cap: %v", err)
	}
	for _, c := range []room.Command{unbanUser(owner, id("b", 7)), unmuteMember(owner, id("m", 7)), join("newcomer"), closeRoom(owner)} {
		if evs, err := room.Decide(s, c); err != nil || len(evs) == 0 {
			t.Fatalf("%s at the caps: %v %v", c.Type, evs, err)
		}
	}
}

// A snapshot written before imposers were recorded decodes as it was, and
// its bans and mutes count as an admin's: an admin may lift them, as when
// they were imposed.
func TestOldSnapshotBansAreAdmins(t *testing.T) {
	old := fmt.Sprintf(`{"app_code":%q,"room_id":%q,"seq":9,"exists":true,"owner":"owner","name":"n","status":"open",`+
		`"admins":["admin"],"members":{"owner":%d,"admin":%d,"alice":%d},"seats":["","",""],"bans":{"carol":%d},"heat":0,"created_at_ms":%d,`+
		`"extra":{"mutes":{"alice":%d}}}`, tApp, tRoom, t0, t0, t0, t0+60_000, t0, t0+60_000)
	s, err := room.UnmarshalState([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if s.Extra == nil || s.Extra.BanNotes != nil || s.Extra.MuteBy != nil || !s.BannedAt("carol", t0) {
		t.Fatalf("old snapshot decoded as %+v", s)
	}
	for _, c := range []room.Command{unbanUser("admin", "carol"), unmuteMember("admin", "alice")} {
		if evs, err := room.Decide(s, c); err != nil || len(evs) != 1 {
			t.Fatalf("%s of an old entry by an admin: %v %v", c.Type, evs, err)
		}
	}
}
