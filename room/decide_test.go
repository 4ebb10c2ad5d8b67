package room_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// The room's rules, one row each. A row reads: given these commands were
// accepted, when cmd is decided, then exactly these events (or this error)
// come out.

const (
	tApp  = "app1"
	tRoom = "room1"
	t0    = int64(1_700_000_000_000)
)

type opt func(*room.Command)

func at(ms int64) opt               { return func(c *room.Command) { c.NowMs = ms } }
func reason(r string) opt           { return func(c *room.Command) { c.Reason = r } }
func seats(n int) opt               { return func(c *room.Command) { c.MicSeats = n } }
func admins(ids ...string) opt      { return func(c *room.Command) { c.Admins = ids } }
func named(n string) opt            { return func(c *room.Command) { c.Name = n } }
func set(f func(*room.Command)) opt { return f }
func giftID(id string) opt          { return func(c *room.Command) { c.GiftID = id } }
func commandID(id string) opt       { return func(c *room.Command) { c.CommandID = id } }
func ban(seconds int64) opt         { return func(c *room.Command) { c.BanSeconds = seconds } }
func withTarget(target string) opt  { return func(c *room.Command) { c.TargetUserID = target } }
func capped(members int) opt        { return func(c *room.Command) { c.MaxMembers = members } }

func cmd(typ, user string, opts ...opt) room.Command {
	c := room.Command{Type: typ, CommandID: "cmd-1", RequestID: "req-1", AppCode: tApp, RoomID: tRoom, UserID: user, NowMs: t0}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func create(owner string, opts ...opt) room.Command {
	return cmd(room.CmdCreateRoom, owner, append([]opt{named("Friday night")}, opts...)...)
}
func join(user string, opts ...opt) room.Command  { return cmd(room.CmdJoinRoom, user, opts...) }
func leave(user string, opts ...opt) room.Command { return cmd(room.CmdLeaveRoom, user, opts...) }
func takeMic(user string, seat int, opts ...opt) room.Command {
	return cmd(room.CmdTakeMic, user, append([]opt{func(c *room.Command) { c.Seat = seat }}, opts...)...)
}
func releaseMic(user string, opts ...opt) room.Command { return cmd(room.CmdReleaseMic, user, opts...) }
func gift(from, to string, count, heat int64, opts ...opt) room.Command {
	return cmd(room.CmdSendGift, from, append([]opt{func(c *room.Command) {
		c.ToUserID, c.GiftID, c.GiftCount, c.HeatValue = to, "rose", count, heat
	}}, opts...)...)
}
func kick(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdKickUser, op, append([]opt{withTarget(target)}, opts...)...)
}
func closeRoom(op string, opts ...opt) room.Command { return cmd(room.CmdCloseRoom, op, opts...) }
func setAdmin(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdSetAdmin, op, append([]opt{withTarget(target)}, opts...)...)
}
func removeAdmin(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdRemoveAdmin, op, append([]opt{withTarget(target)}, opts...)...)
}
func transferOwner(op, target string) room.Command {
	return cmd(room.CmdTransferOwner, op, withTarget(target))
}
func onSeat(typ, op string, seat int, opts ...opt) room.Command {
	return cmd(typ, op, append([]opt{func(c *room.Command) { c.Seat = seat }}, opts...)...)
}
func muteSeat(op string, seat int) room.Command   { return onSeat(room.CmdMuteSeat, op, seat) }
func unmuteSeat(op string, seat int) room.Command { return onSeat(room.CmdUnmuteSeat, op, seat) }
func lockSeat(op string, seat int) room.Command   { return onSeat(room.CmdLockSeat, op, seat) }
func unlockSeat(op string, seat int) room.Command { return onSeat(room.CmdUnlockSeat, op, seat) }
func announce(a string) opt                       { return func(c *room.Command) { c.Announcement = &a } }
func updateRoom(op string, opts ...opt) room.Command {
	return cmd(room.CmdUpdateRoom, op, opts...)
}
func heartbeat(user string, opts ...opt) room.Command {
	return cmd(room.CmdHeartbeat, user, opts...)
}

// given returns the state after the commands, each decided and applied as
// the grain does; it fails the test if one is rejected.
func given(t testing.TB, cmds ...room.Command) room.State {
	t.Helper()
	s := room.NewState(tApp, tRoom)
	for i, c := range cmds {
		evs, err := room.Decide(s, c)
		if err != nil {
			t.Fatalf("given[%d] %s by %s: %v", i, c.Type, c.UserID, err)
		}
		// In place, as the grain applies (the property test holds it equal
		// to ApplyCommand): the rooms at the list caps take thousands of
		// commands.
		s.ApplyInPlace(s.Seq+1, evs)
	}
	return s
}

// then appends more commands to a copy of base.
func then(base []room.Command, more ...room.Command) []room.Command {
	return append(append([]room.Command(nil), base...), more...)
}

// aRoom: owner "owner", admins "admin" and "admin2", members the three of
// them plus "alice" and "bob"; 8 seats, all free.
var aRoom = []room.Command{
	create("owner", admins("admin", "admin2")),
	join("admin"), join("admin2"), join("alice"), join("bob"),
}

// aClosed: aRoom with bob on seat 1, then closed by the owner.
var aClosed = then(aRoom, takeMic("bob", 1), closeRoom("owner"))

type rule struct {
	name  string
	given []room.Command
	cmd   room.Command
	want  []room.Event // nil with err nil: accepted as a no-op
	err   error        // the rule error
	class error        // its class
	msg   string       // for errclass.Invalid rows: a word the message must contain (which field)
}

func invalid(name string, given []room.Command, c room.Command, field string) rule {
	return rule{name: name, given: given, cmd: c, err: errclass.Invalid, class: errclass.Invalid, msg: field}
}

func adminIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("adm%d", i)
	}
	return ids
}

func rules() []rule {
	long := func(n int) string { return strings.Repeat("a", n) }
	rs := []rule{
		// CreateRoom
		{name: "create: owner joins, default 8 seats", cmd: create("owner"),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: 8, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "create: mic_seats 1", cmd: create("owner", seats(1)),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: 1, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "create: mic_seats 20 is the max", cmd: create("owner", seats(room.MaxMicSeats)),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: 20, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "create: admins sorted, deduplicated, owner not listed",
			cmd: create("owner", admins("zed", "amy", "zed", "owner")),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: "Friday night", MicSeats: 8, AdminUserIDs: []string{"amy", "zed"}, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "create: name of max length", cmd: create("owner", named(long(room.MaxNameLen))),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: long(room.MaxNameLen), MicSeats: 8, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "create: twice", given: aRoom, cmd: create("alice"), err: room.ErrRoomExists, class: errclass.Exists},
		{name: "create: on a closed room", given: aClosed, cmd: create("owner"), err: room.ErrRoomExists, class: errclass.Exists},
		invalid("create: mic_seats -1", nil, create("owner", seats(-1)), "mic_seats"),
		invalid("create: mic_seats 21", nil, create("owner", seats(room.MaxMicSeats+1)), "mic_seats"),
		invalid("create: empty name", nil, create("owner", named("")), "name"),
		invalid("create: name too long", nil, create("owner", named(long(room.MaxNameLen+1))), "name"),
		invalid("create: name not UTF-8", nil, create("owner", named("caf\xe9")), "name"),
		invalid("create: too many admins", nil, create("owner", admins(strings.Fields(strings.Repeat("a ", room.MaxAdmins+1))...)), "admin_user_ids"),
		invalid("create: bad admin id", nil, create("owner", admins("ok", "bad id")), "admin_user_ids"),

		// JoinRoom
		{name: "join: a full room refuses a new member", given: aRoom, cmd: join("carol", capped(5)), err: room.ErrRoomFull, class: errclass.Exhausted},
		{name: "join: a full room takes its owner", given: then(aRoom, leave("owner"), join("carol", capped(5))), cmd: join("owner", capped(5)),
			want: []room.Event{room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0}}},
		{name: "join: under the cap", given: aRoom, cmd: join("carol", capped(6)),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "join: a member of a full room joining again is a no-op", given: aRoom, cmd: join("alice", capped(5))},
		{name: "join: a new user joins", given: aRoom, cmd: join("carol", at(t0+5)),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0 + 5}}},
		{name: "join: a member joining again is a no-op", given: aRoom, cmd: join("alice", at(t0+5))},
		{name: "join: owner who left comes back", given: then(aRoom, leave("owner")), cmd: join("owner", at(t0+5)),
			want: []room.Event{room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0 + 5}}},
		{name: "join: kicked without ban rejoins at once", given: then(aRoom, kick("owner", "alice")), cmd: join("alice"),
			want: []room.Event{room.RoomUserJoined{UserID: "alice", JoinedAtMs: t0}}},
		{name: "join: banned while now < until", given: then(aRoom, kick("owner", "alice", ban(60))),
			cmd: join("alice", at(t0+60_000-1)), err: room.ErrBanned, class: errclass.Precondition},
		{name: "join: ban ends at until (now == until)", given: then(aRoom, kick("owner", "alice", ban(60))),
			cmd:  join("alice", at(t0+60_000)),
			want: []room.Event{room.RoomUserJoined{UserID: "alice", JoinedAtMs: t0 + 60_000}}},
		{name: "join: rejoin after the ban expired", given: then(aRoom, kick("owner", "alice", ban(60))),
			cmd:  join("alice", at(t0+3_600_000)),
			want: []room.Event{room.RoomUserJoined{UserID: "alice", JoinedAtMs: t0 + 3_600_000}}},
		{name: "join: a ban on one user does not stop another", given: then(aRoom, kick("owner", "alice", ban(60))),
			cmd: join("carol"), want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "join: banned again after a second kick", given: then(aRoom, kick("owner", "alice", ban(60)),
			join("alice", at(t0+60_000)), kick("admin", "alice", ban(10), at(t0+70_000))),
			cmd: join("alice", at(t0+79_999)), err: room.ErrBanned, class: errclass.Precondition},

		// LeaveRoom
		{name: "leave: a member leaves", given: aRoom, cmd: leave("alice"),
			want: []room.Event{room.RoomUserLeft{UserID: "alice", Reason: room.ReasonLeft}}},
		{name: "leave: a system reason from the room's own workers (internal path)", given: aRoom, cmd: leave("alice", reason(room.ReasonHeartbeatTimeout)),
			want: []room.Event{room.RoomUserLeft{UserID: "alice", Reason: room.ReasonHeartbeatTimeout}}},
		{name: "leave: with a seat releases the seat first", given: then(aRoom, takeMic("alice", 3)), cmd: leave("alice"),
			want: []room.Event{
				room.RoomMicReleased{UserID: "alice", Seat: 3, Reason: room.ReasonLeft},
				room.RoomUserLeft{UserID: "alice", Reason: room.ReasonLeft},
			}},
		{name: "leave: the owner may leave, the room stays open", given: aRoom, cmd: leave("owner"),
			want: []room.Event{room.RoomUserLeft{UserID: "owner", Reason: room.ReasonLeft}}},
		{name: "leave: not a member", given: aRoom, cmd: leave("carol"), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "leave: twice", given: then(aRoom, leave("alice")), cmd: leave("alice"), err: room.ErrNotMember, class: errclass.Precondition},

		// TakeMic
		{name: "mic: a member takes a free seat", given: aRoom, cmd: takeMic("alice", 0),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 0}}},
		{name: "mic: last seat of the room", given: aRoom, cmd: takeMic("alice", 7),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 7}}},
		{name: "mic: seat 19 of a 20-seat room", given: []room.Command{create("owner", seats(20))}, cmd: takeMic("owner", 19),
			want: []room.Event{room.RoomMicTaken{UserID: "owner", Seat: 19}}},
		{name: "mic: only members take a seat", given: aRoom, cmd: takeMic("carol", 0), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "mic: a taken seat can't be taken", given: then(aRoom, takeMic("bob", 2)), cmd: takeMic("alice", 2),
			err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "mic: one seat per user", given: then(aRoom, takeMic("alice", 1)), cmd: takeMic("alice", 2),
			err: room.ErrAlreadySeated, class: errclass.Precondition},
		{name: "mic: taking the seat one holds is a no-op", given: then(aRoom, takeMic("alice", 1)), cmd: takeMic("alice", 1)},
		{name: "mic: a released seat can be taken by another", given: then(aRoom, takeMic("bob", 2), releaseMic("bob")),
			cmd: takeMic("alice", 2), want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 2}}},
		{name: "mic: the seat of a user who left is free", given: then(aRoom, takeMic("bob", 2), leave("bob")),
			cmd: takeMic("alice", 2), want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 2}}},
		{name: "mic: the seat of a kicked user is free", given: then(aRoom, takeMic("bob", 2), kick("owner", "bob")),
			cmd: takeMic("alice", 2), want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 2}}},
		invalid("mic: seat beyond the room's seats", []room.Command{create("owner", seats(4))}, takeMic("owner", 4), "seat"),
		invalid("mic: seat 8 in a default room", aRoom, takeMic("alice", 8), "seat"),
		invalid("mic: seat negative", aRoom, takeMic("alice", -1), "seat"),
		invalid("mic: seat 20 beyond the max", []room.Command{create("owner", seats(20))}, takeMic("owner", room.MaxMicSeats), "seat"),

		// ReleaseMic
		{name: "release: a seated member releases", given: then(aRoom, takeMic("alice", 5)), cmd: releaseMic("alice"),
			want: []room.Event{room.RoomMicReleased{UserID: "alice", Seat: 5, Reason: room.ReasonReleased}}},
		{name: "release: not seated", given: aRoom, cmd: releaseMic("alice"), err: room.ErrNotSeated, class: errclass.Precondition},
		{name: "release: twice", given: then(aRoom, takeMic("alice", 5), releaseMic("alice")), cmd: releaseMic("alice"),
			err: room.ErrNotSeated, class: errclass.Precondition},
		{name: "release: not a member", given: aRoom, cmd: releaseMic("carol"), err: room.ErrNotMember, class: errclass.Precondition},

		// SendGift
		{name: "gift: member to member adds heat", given: aRoom, cmd: gift("alice", "bob", 3, 300),
			want: []room.Event{
				room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: 3, HeatValue: 300},
				room.RoomHeatChanged{Delta: 300, Heat: 300},
			}},
		{name: "gift: heat accumulates", given: then(aRoom, gift("alice", "bob", 1, 100)), cmd: gift("bob", "alice", 1, 50),
			want: []room.Event{
				room.RoomGiftSent{FromUserID: "bob", ToUserID: "alice", GiftID: "rose", GiftCount: 1, HeatValue: 50},
				room.RoomHeatChanged{Delta: 50, Heat: 150},
			}},
		{name: "gift: a gift without heat changes no heat", given: aRoom, cmd: gift("alice", "bob", 1, 0),
			want: []room.Event{room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: 1}}},
		{name: "gift: heat saturates at max int64", given: then(aRoom, gift("alice", "bob", 1, math.MaxInt64-10)),
			cmd: gift("alice", "bob", 1, 100),
			want: []room.Event{
				room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: 1, HeatValue: 100},
				room.RoomHeatChanged{Delta: 10, Heat: math.MaxInt64},
			}},
		{name: "gift: count at the max", given: aRoom, cmd: gift("alice", "bob", room.MaxGiftCount, 0),
			want: []room.Event{room.RoomGiftSent{FromUserID: "alice", ToUserID: "bob", GiftID: "rose", GiftCount: room.MaxGiftCount}}},
		{name: "gift: to oneself is allowed (the sender pays)", given: aRoom, cmd: gift("alice", "alice", 1, 10),
			want: []room.Event{
				room.RoomGiftSent{FromUserID: "alice", ToUserID: "alice", GiftID: "rose", GiftCount: 1, HeatValue: 10},
				room.RoomHeatChanged{Delta: 10, Heat: 10},
			}},
		{name: "gift: sender not a member", given: aRoom, cmd: gift("carol", "bob", 1, 1), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "gift: receiver not a member", given: aRoom, cmd: gift("alice", "carol", 1, 1), err: room.ErrReceiverAbsent, class: errclass.Precondition},
		{name: "gift: receiver left", given: then(aRoom, leave("bob")), cmd: gift("alice", "bob", 1, 1), err: room.ErrReceiverAbsent, class: errclass.Precondition},
		invalid("gift: count 0", aRoom, gift("alice", "bob", 0, 1), "gift_count"),
		invalid("gift: count negative", aRoom, gift("alice", "bob", -1, 1), "gift_count"),
		invalid("gift: count too big", aRoom, gift("alice", "bob", room.MaxGiftCount+1, 1), "gift_count"),
		invalid("gift: heat negative", aRoom, gift("alice", "bob", 1, -1), "heat"),
		invalid("gift: empty gift_id", aRoom, gift("alice", "bob", 1, 1, giftID("")), "gift_id"),
		invalid("gift: bad gift_id", aRoom, gift("alice", "bob", 1, 1, giftID("a/b")), "gift_id"),
		invalid("gift: empty to_user_id", aRoom, gift("alice", "", 1, 1), "to_user_id"),
		invalid("gift: bad to_user_id", aRoom, gift("alice", "b:ob", 1, 1), "to_user_id"),

		// KickUser
		{name: "kick: owner kicks a member", given: aRoom, cmd: kick("owner", "alice", reason("spam")),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", Reason: "spam"}}},
		{name: "kick: with a seat releases it first", given: then(aRoom, takeMic("alice", 4)), cmd: kick("owner", "alice"),
			want: []room.Event{
				room.RoomMicReleased{UserID: "alice", Seat: 4, Reason: room.ReasonKicked},
				room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner"},
			}},
		{name: "kick: with a ban", given: aRoom, cmd: kick("owner", "alice", ban(60), at(t0+1)),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", BanUntilMs: t0 + 1 + 60_000}}},
		{name: "kick: ban of the max length", given: aRoom, cmd: kick("owner", "alice", ban(room.MaxBanSeconds)),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", BanUntilMs: t0 + room.MaxBanSeconds*1000}}},
		{name: "kick: an admin listed on the room kicks a member", given: aRoom, cmd: kick("admin", "alice"),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "admin"}}},
		{name: "kick: the owner kicks an admin, who is no admin any more", given: aRoom, cmd: kick("owner", "admin"),
			want: []room.Event{room.RoomAdminRemoved{TargetUserID: "admin", OperatorUserID: "owner"}, room.RoomUserKicked{TargetUserID: "admin", OperatorUserID: "owner"}}},
		{name: "kick: a kicked admin comes back a member", given: then(aRoom, kick("owner", "admin"), join("admin")), cmd: kick("admin", "alice"),
			err: room.ErrNotOwner, class: errclass.Permission},
		{name: "kick: the owner kicks from outside the room", given: then(aRoom, leave("owner")), cmd: kick("owner", "alice"),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner"}}},
		{name: "kick: a member who is no admin may not", given: aRoom, cmd: kick("alice", "bob"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "kick: a non-member may not", given: aRoom, cmd: kick("carol", "bob"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "kick: an admin may not kick another admin", given: aRoom, cmd: kick("admin", "admin2"), err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "kick: nobody kicks the owner", given: aRoom, cmd: kick("admin", "owner"), err: room.ErrKickOwner, class: errclass.Precondition},
		{name: "kick: a member kicking the owner lacks permission first", given: aRoom, cmd: kick("alice", "owner"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "kick: an admin outside the room may not", given: then(aRoom, leave("admin")), cmd: kick("admin", "alice"),
			err: room.ErrNotMember, class: errclass.Precondition},
		{name: "kick: a kicked and banned admin may not (no admin any more)", given: then(aRoom, kick("owner", "admin", ban(3600))), cmd: kick("admin", "alice"),
			err: room.ErrNotOwner, class: errclass.Permission},
		{name: "kick: target not a member", given: aRoom, cmd: kick("owner", "carol"), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "kick: target already kicked", given: then(aRoom, kick("owner", "alice")), cmd: kick("admin", "alice"),
			err: room.ErrNotMember, class: errclass.Precondition},
		invalid("kick: oneself (owner)", aRoom, kick("owner", "owner"), "target_user_id"),
		invalid("kick: oneself (member)", aRoom, kick("alice", "alice"), "target_user_id"),
		invalid("kick: empty target", aRoom, kick("owner", ""), "target_user_id"),
		invalid("kick: bad target", aRoom, kick("owner", "al ice"), "target_user_id"),
		invalid("kick: ban seconds negative", aRoom, kick("owner", "alice", ban(-1)), "ban_seconds"),
		invalid("kick: ban seconds too long", aRoom, kick("owner", "alice", ban(room.MaxBanSeconds+1)), "ban_seconds"),
		invalid("kick: reason too long", aRoom, kick("owner", "alice", reason(long(room.MaxReasonLen+1))), "reason"),
		invalid("kick: reason not UTF-8", aRoom, kick("owner", "alice", reason("\xff\xfe")), "reason"),
		{name: "kick: reason of max length, multi-byte", given: aRoom, cmd: kick("owner", "alice", reason(strings.Repeat("踢", room.MaxReasonLen/3))),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner", Reason: strings.Repeat("踢", room.MaxReasonLen/3)}}},

		// CloseRoom
		{name: "close: the owner closes", given: aRoom, cmd: closeRoom("owner", reason("good night")),
			want: []room.Event{room.RoomClosed{OperatorUserID: "owner", Reason: "good night"}}},
		{name: "close: an admin listed on the room closes", given: aRoom, cmd: closeRoom("admin"),
			want: []room.Event{room.RoomClosed{OperatorUserID: "admin"}}},
		{name: "close: the owner closes from outside the room", given: then(aRoom, leave("owner")), cmd: closeRoom("owner"),
			want: []room.Event{room.RoomClosed{OperatorUserID: "owner"}}},
		{name: "close: a member who is no admin may not", given: aRoom, cmd: closeRoom("alice"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "close: an admin outside the room may not", given: then(aRoom, leave("admin")), cmd: closeRoom("admin"),
			err: room.ErrNotMember, class: errclass.Precondition},
		invalid("close: reason too long", aRoom, closeRoom("owner", reason(long(room.MaxReasonLen+1))), "reason"),

		// TransferOwner: the owner only, to a member.
		{name: "owner: the owner hands the room to a member", given: aRoom, cmd: transferOwner("owner", "alice"),
			want: []room.Event{room.RoomOwnerChanged{OwnerUserID: "alice", PreviousOwnerUserID: "owner"}}},
		{name: "owner: the new owner may appoint, the old one may not", given: then(aRoom, transferOwner("owner", "alice")),
			cmd: setAdmin("owner", "bob"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "owner: the new owner closes the room", given: then(aRoom, transferOwner("owner", "alice")), cmd: closeRoom("alice"),
			want: []room.Event{room.RoomClosed{OperatorUserID: "alice"}}},
		{name: "owner: the old owner can be kicked by the new one", given: then(aRoom, join("owner"), transferOwner("owner", "alice")),
			cmd: kick("alice", "owner"), want: []room.Event{room.RoomUserKicked{TargetUserID: "owner", OperatorUserID: "alice"}}},
		{name: "owner: an admin made owner is no longer listed as admin", given: then(aRoom, transferOwner("owner", "admin")),
			cmd: removeAdmin("admin", "admin"), err: room.ErrAdminOwner, class: errclass.Precondition},
		{name: "owner: an admin may not hand the room on", given: aRoom, cmd: transferOwner("admin", "alice"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "owner: not to someone outside the room", given: aRoom, cmd: transferOwner("owner", "carol"), err: room.ErrNotMember, class: errclass.Precondition},
		invalid("owner: not to the owner themself", aRoom, transferOwner("owner", "owner"), "target_user_id"),
		invalid("owner: a target is needed", aRoom, transferOwner("owner", ""), "target_user_id"),

		// SetAdmin / RemoveAdmin: the owner only.
		{name: "admin: the owner makes a member an admin", given: aRoom, cmd: setAdmin("owner", "alice"),
			want: []room.Event{room.RoomAdminSet{TargetUserID: "alice", OperatorUserID: "owner"}}},
		{name: "admin: the owner may appoint someone not in the room", given: aRoom, cmd: setAdmin("owner", "carol"),
			want: []room.Event{room.RoomAdminSet{TargetUserID: "carol", OperatorUserID: "owner"}}},
		{name: "admin: the owner appoints from outside the room", given: then(aRoom, leave("owner")), cmd: setAdmin("owner", "alice"),
			want: []room.Event{room.RoomAdminSet{TargetUserID: "alice", OperatorUserID: "owner"}}},
		{name: "admin: an admin again is a no-op", given: aRoom, cmd: setAdmin("owner", "admin")},
		{name: "admin: an admin may not appoint", given: aRoom, cmd: setAdmin("admin", "alice"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "admin: a member may not appoint themself", given: aRoom, cmd: setAdmin("alice", "alice"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "admin: the owner is not made an admin", given: aRoom, cmd: setAdmin("owner", "owner"), err: room.ErrAdminOwner, class: errclass.Precondition},
		{name: "admin: at most MaxAdmins", given: []room.Command{create("owner", admins(adminIDs(room.MaxAdmins)...))},
			cmd: setAdmin("owner", "one-more"), err: room.ErrTooManyAdmins, class: errclass.Precondition},
		{name: "admin: an appointed admin kicks members", given: then(aRoom, setAdmin("owner", "alice")), cmd: kick("alice", "bob"),
			want: []room.Event{room.RoomUserKicked{TargetUserID: "bob", OperatorUserID: "alice"}}},
		{name: "admin: an appointed admin can't be kicked by another admin", given: then(aRoom, setAdmin("owner", "alice")), cmd: kick("admin", "alice"),
			err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "admin: the owner removes an admin", given: aRoom, cmd: removeAdmin("owner", "admin"),
			want: []room.Event{room.RoomAdminRemoved{TargetUserID: "admin", OperatorUserID: "owner"}}},
		{name: "admin: removing a non-admin is a no-op", given: aRoom, cmd: removeAdmin("owner", "alice")},
		{name: "admin: an admin may not remove another", given: aRoom, cmd: removeAdmin("admin", "admin2"), err: room.ErrOwnerOnly, class: errclass.Permission},
		{name: "admin: the owner is not removed", given: aRoom, cmd: removeAdmin("owner", "owner"), err: room.ErrAdminOwner, class: errclass.Precondition},
		{name: "admin: a removed admin may not kick", given: then(aRoom, removeAdmin("owner", "admin")), cmd: kick("admin", "alice"),
			err: room.ErrNotOwner, class: errclass.Permission},
		{name: "admin: a removed admin stays a member", given: then(aRoom, removeAdmin("owner", "admin")), cmd: heartbeat("admin")},
		invalid("admin: empty target", aRoom, setAdmin("owner", ""), "target_user_id"),
		invalid("admin: bad target", aRoom, removeAdmin("owner", "a/b"), "target_user_id"),

		// MuteSeat / UnmuteSeat: owner or admin; the mute belongs to the seat.
		{name: "mute: the owner mutes an occupied seat, the holder stays", given: then(aRoom, takeMic("alice", 2)), cmd: muteSeat("owner", 2),
			want: []room.Event{room.RoomSeatMuted{Seat: 2, UserID: "alice", OperatorUserID: "owner"}}},
		{name: "mute: an admin mutes a free seat", given: aRoom, cmd: muteSeat("admin", 3),
			want: []room.Event{room.RoomSeatMuted{Seat: 3, OperatorUserID: "admin"}}},
		{name: "mute: muted twice is a no-op", given: then(aRoom, muteSeat("owner", 3)), cmd: muteSeat("admin", 3)},
		{name: "mute: a muted seat can still be taken", given: then(aRoom, muteSeat("owner", 3)), cmd: takeMic("alice", 3),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 3}}},
		{name: "mute: a member may not", given: aRoom, cmd: muteSeat("alice", 0), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "mute: an admin outside the room may not", given: then(aRoom, leave("admin")), cmd: muteSeat("admin", 0),
			err: room.ErrNotMember, class: errclass.Precondition},
		{name: "unmute: an admin unmutes", given: then(aRoom, muteSeat("owner", 3)), cmd: unmuteSeat("admin", 3),
			want: []room.Event{room.RoomSeatUnmuted{Seat: 3, OperatorUserID: "admin"}}},
		{name: "unmute: a seat that is not muted is a no-op", given: aRoom, cmd: unmuteSeat("owner", 3)},
		{name: "unmute: a member may not", given: then(aRoom, muteSeat("owner", 3)), cmd: unmuteSeat("alice", 3), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("mute: seat beyond the room's seats", aRoom, muteSeat("owner", 8), "seat"),
		invalid("mute: seat negative", aRoom, muteSeat("owner", -1), "seat"),
		invalid("unmute: seat beyond the max", aRoom, unmuteSeat("owner", room.MaxMicSeats), "seat"),

		// LockSeat / UnlockSeat: owner or admin; a locked seat can't be taken.
		{name: "lock: a free seat", given: aRoom, cmd: lockSeat("admin", 4),
			want: []room.Event{room.RoomSeatLocked{Seat: 4, OperatorUserID: "admin"}}},
		{name: "lock: an occupied seat takes its holder off first", given: then(aRoom, takeMic("alice", 4)), cmd: lockSeat("owner", 4),
			want: []room.Event{
				room.RoomMicReleased{UserID: "alice", Seat: 4, Reason: room.ReasonSeatLocked},
				room.RoomSeatLocked{Seat: 4, OperatorUserID: "owner"},
			}},
		{name: "lock: locked twice is a no-op", given: then(aRoom, lockSeat("owner", 4)), cmd: lockSeat("admin", 4)},
		{name: "lock: a locked seat can't be taken", given: then(aRoom, lockSeat("owner", 4)), cmd: takeMic("alice", 4),
			err: room.ErrSeatLocked, class: errclass.Precondition},
		{name: "lock: not even by the owner", given: then(aRoom, lockSeat("admin", 4)), cmd: takeMic("owner", 4),
			err: room.ErrSeatLocked, class: errclass.Precondition},
		{name: "lock: the released holder may take another seat", given: then(aRoom, takeMic("alice", 4), lockSeat("owner", 4)), cmd: takeMic("alice", 5),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 5}}},
		{name: "lock: a member may not", given: aRoom, cmd: lockSeat("alice", 4), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "unlock: the seat can be taken again", given: then(aRoom, lockSeat("owner", 4), unlockSeat("admin", 4)), cmd: takeMic("alice", 4),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 4}}},
		{name: "unlock: an admin unlocks", given: then(aRoom, lockSeat("owner", 4)), cmd: unlockSeat("admin2", 4),
			want: []room.Event{room.RoomSeatUnlocked{Seat: 4, OperatorUserID: "admin2"}}},
		{name: "unlock: a seat that is not locked is a no-op", given: aRoom, cmd: unlockSeat("owner", 4)},
		{name: "unlock: a member may not", given: then(aRoom, lockSeat("owner", 4)), cmd: unlockSeat("bob", 4), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("lock: seat beyond the room's seats", []room.Command{create("owner", seats(2))}, lockSeat("owner", 2), "seat"),
		invalid("unlock: seat negative", aRoom, unlockSeat("owner", -3), "seat"),

		// UpdateRoom: owner or admin; name, announcement or both.
		{name: "update: the owner renames", given: aRoom, cmd: updateRoom("owner", named("Saturday")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "Saturday"}}},
		{name: "update: an admin sets the announcement, the name stays", given: aRoom, cmd: updateRoom("admin", announce("Be nice\nNo spam")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "admin", Name: "Friday night", Announcement: "Be nice\nNo spam"}}},
		{name: "update: both at once", given: aRoom, cmd: updateRoom("owner", named("Sat"), announce("hi")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "Sat", Announcement: "hi"}}},
		{name: "update: an empty announcement clears it", given: then(aRoom, updateRoom("owner", announce("hi"))), cmd: updateRoom("owner", announce("")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "Friday night"}}},
		{name: "update: nothing changes is a no-op", given: then(aRoom, updateRoom("owner", announce("hi"))), cmd: updateRoom("admin", named("Friday night"), announce("hi"))},
		{name: "update: the owner from outside the room", given: then(aRoom, leave("owner")), cmd: updateRoom("owner", named("x")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "x"}}},
		{name: "update: announcement of max length", given: aRoom, cmd: updateRoom("owner", announce(long(room.MaxAnnouncement))),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "Friday night", Announcement: long(room.MaxAnnouncement)}}},
		{name: "update: a member may not", given: aRoom, cmd: updateRoom("alice", named("mine")), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "update: an admin outside the room may not", given: then(aRoom, leave("admin")), cmd: updateRoom("admin", named("x")),
			err: room.ErrNotMember, class: errclass.Precondition},
		invalid("update: neither name nor announcement", aRoom, updateRoom("owner"), "name or announcement"),
		invalid("update: blank name", aRoom, updateRoom("owner", named("   ")), "name"),
		invalid("update: name too long", aRoom, updateRoom("owner", named(long(room.MaxNameLen+1))), "name"),
		invalid("update: announcement too long", aRoom, updateRoom("owner", announce(long(room.MaxAnnouncement+1))), "announcement"),
		invalid("update: announcement not UTF-8", aRoom, updateRoom("owner", announce("\xff")), "announcement"),
		invalid("update: announcement with NUL", aRoom, updateRoom("owner", announce("a\x00b")), "announcement"),
		invalid("update: announcement with CR", aRoom, updateRoom("owner", announce("a\r\nb")), "announcement"),

		// Free text: no control characters, no blank names.
		invalid("text: name of spaces", nil, create("owner", named("   ")), "name"),
		invalid("text: name of Unicode spaces", nil, create("owner", named("\u3000\u00a0 ")), "name"),
		invalid("text: name with NUL", nil, create("owner", named("a\x00b")), "name"),
		invalid("text: name with a newline", nil, create("owner", named("a\nb")), "name"),
		invalid("text: name with ESC", nil, create("owner", named("\x1b[31mred")), "name"),
		invalid("text: name with DEL", nil, create("owner", named("a\x7f")), "name"),
		invalid("text: name with a C1 control", nil, create("owner", named("a\u0085b")), "name"),
		invalid("text: name with a tab", aRoom, updateRoom("owner", named("a\tb")), "name"),
		invalid("text: leave reason with NUL", aRoom, leave("alice", reason("bye\x00")), "reason"),
		invalid("text: kick reason with a newline", aRoom, kick("owner", "alice", reason("spam\nspam")), "reason"),
		invalid("text: close reason with BEL", aRoom, closeRoom("owner", reason("\a")), "reason"),
		{name: "text: a name with inner and outer spaces is kept as is", cmd: create("owner", named(" 周五 夜 ")),
			want: []room.Event{
				room.RoomCreated{OwnerUserID: "owner", Name: " 周五 夜 ", MicSeats: 8, CreatedAtMs: t0},
				room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0},
			}},
		{name: "text: emoji and CJK pass", given: aRoom, cmd: updateRoom("owner", named("🎤 房间")),
			want: []room.Event{room.RoomUpdated{OperatorUserID: "owner", Name: "🎤 房间"}}},

		// Heartbeat
		{name: "heartbeat: a member is still in the room", given: aRoom, cmd: heartbeat("alice")},
		{name: "heartbeat: needs no command_id (it is not logged)", given: aRoom, cmd: heartbeat("alice", commandID(""))},
		{name: "heartbeat: a non-member learns they are out", given: aRoom, cmd: heartbeat("carol"), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "heartbeat: a kicked user learns they are out", given: then(aRoom, kick("owner", "alice")), cmd: heartbeat("alice"),
			err: room.ErrNotMember, class: errclass.Precondition},

		// Identifiers, checked on every command before the room is looked at.
		invalid("ids: unknown command type", nil, cmd("Dance", "alice"), "command type"),
		invalid("ids: empty app_code", aRoom, join("carol", set(func(c *room.Command) { c.AppCode = "" })), "app_code"),
		invalid("ids: empty room_id", aRoom, join("carol", set(func(c *room.Command) { c.RoomID = "" })), "room_id"),
		invalid("ids: empty user_id", aRoom, join(""), "user_id"),
		invalid("ids: empty command_id on a logged command", aRoom, join("carol", commandID("")), "command_id"),
		invalid("ids: user_id too long", aRoom, join(long(room.MaxIDLen+1)), "user_id"),
		invalid("ids: room_id too long", aRoom, join("carol", set(func(c *room.Command) { c.RoomID = long(room.MaxIDLen + 1) })), "room_id"),
		invalid("ids: command_id too long", aRoom, join("carol", commandID(long(room.MaxIDLen+1))), "command_id"),
		invalid("ids: space", aRoom, join("car ol"), "user_id"),
		invalid("ids: colon (joins keys)", aRoom, join("car:ol"), "user_id"),
		invalid("ids: slash (joins keys)", aRoom, join("car/ol"), "user_id"),
		invalid("ids: non-ASCII", aRoom, join("carölina"), "user_id"),
		invalid("ids: control character", aRoom, join("car\tol"), "user_id"),
		invalid("ids: DEL", aRoom, join("car\x7fol"), "user_id"),
		invalid("ids: bad app_code", aRoom, join("carol", set(func(c *room.Command) { c.AppCode = "app 1" })), "app_code"),
		{name: "ids: max length and punctuation are fine", given: aRoom, cmd: join(long(room.MaxIDLen-4) + "-_.@"),
			want: []room.Event{room.RoomUserJoined{UserID: long(room.MaxIDLen-4) + "-_.@", JoinedAtMs: t0}}},
		invalid("ids: leave reason not UTF-8", aRoom, leave("alice", reason("\xc3")), "reason"),
	}
	rs = append(rs, seatRequestRules()...)
	rs = append(rs, seatMoveRules()...)
	rs = append(rs, moderationRules()...)
	rs = append(rs, lifecycleRules()...)
	rs = append(rs, metaRules()...)
	rs = append(rs, audioRules()...)
	rs = append(rs, presenceRules()...)
	rs = append(rs, customInfoRules()...)
	rs = append(rs, passwordRules()...)
	rs = append(rs, allMicsRules()...)
	rs = append(rs, likeRules()...)
	rs = append(rs, chatDisabledRules()...)

	// Nothing but CreateRoom finds a room nobody created.
	notCreated := []room.Command{
		join("alice"), leave("alice"), takeMic("alice", 0), releaseMic("alice"),
		gift("alice", "bob", 1, 1), kick("owner", "alice"), closeRoom("owner"), heartbeat("alice"),
		setAdmin("owner", "alice"), removeAdmin("owner", "admin"), muteSeat("owner", 0), unmuteSeat("owner", 0),
		lockSeat("owner", 0), unlockSeat("owner", 0), updateRoom("owner", named("x")),
		seatMode("owner", room.SeatModeApply), applySeat("alice", 0), cancelApp("alice"), approve("owner", "alice"),
		reject("owner", "alice"), invite("owner", "alice", 0), accept("alice"), decline("alice"), expire(),
		kickOffSeat("owner", "alice"), moveSeat("alice", 1), seatCount("owner", 4),
		banUser("owner", "carol", 60), unbanUser("owner", "carol"), muteMember("owner", "alice", 60), unmuteMember("owner", "alice"),
		reopen("owner"), setMeta("owner"), setInfo("owner", map[string]string{"k": "v"}),
		setPassword("owner", "x"), allMics("owner", true), chatOff("owner", true), like("alice", 1),
	}
	for _, c := range notCreated {
		rs = append(rs, rule{name: "no room: " + c.Type, cmd: c, err: room.ErrRoomNotFound, class: errclass.NotFound})
	}
	// A closed room takes nothing (GetRoom is served by the grain, not
	// decided). Every command would be accepted in the open room.
	onClosed := []room.Command{
		join("carol"), join("alice"), leave("alice"), takeMic("alice", 0), releaseMic("bob"),
		gift("alice", "bob", 1, 1), kick("owner", "alice"), closeRoom("owner"), heartbeat("alice"),
		setAdmin("owner", "alice"), removeAdmin("owner", "admin"), muteSeat("owner", 0), unmuteSeat("owner", 0),
		lockSeat("owner", 0), unlockSeat("owner", 0), updateRoom("owner", named("x")),
		seatMode("owner", room.SeatModeApply), invite("owner", "alice", 0), expire(),
		kickOffSeat("owner", "bob"), moveSeat("bob", 2), seatCount("owner", 4),
		banUser("owner", "carol", 60), muteMember("owner", "alice", 60), setMeta("owner", meta("x", "", "")),
		setInfo("owner", map[string]string{"k": "v"}), setPassword("owner", "x"), allMics("owner", true), chatOff("owner", true), like("alice", 1),
	}
	for _, c := range onClosed {
		rs = append(rs, rule{name: "closed: " + c.Type + " by " + c.UserID, given: aClosed, cmd: c, err: room.ErrRoomClosed, class: errclass.Precondition})
	}
	return rs
}

func TestDecideRules(t *testing.T) {
	for _, r := range rules() {
		t.Run(r.name, func(t *testing.T) {
			s := given(t, r.given...)
			before := s.Clone()
			evs, err := room.Decide(s, r.cmd)
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("Decide changed its input state:\nbefore %+v\nafter  %+v", before, s)
			}
			if r.err != nil {
				if err == nil {
					t.Fatalf("accepted with %#v, want error %v", evs, r.err)
				}
				if !errors.Is(err, r.err) {
					t.Fatalf("error %q is not %q", err, r.err)
				}
				if !errors.Is(err, r.class) || errclass.Name(err) != errclass.Name(r.class) {
					t.Fatalf("error %q: class %s, want %s", err, errclass.Name(err), errclass.Name(r.class))
				}
				if !strings.Contains(err.Error(), r.msg) {
					t.Fatalf("error %q does not name %q", err, r.msg)
				}
				if evs != nil {
					t.Fatalf("rejected command returned events %#v", evs)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if len(r.want) == 0 {
				if len(evs) != 0 {
					t.Fatalf("want a no-op, got %#v", evs)
				}
				return
			}
			if !reflect.DeepEqual(evs, r.want) {
				t.Fatalf("events\n got  %#v\n want %#v", evs, r.want)
			}
		})
	}
}

// The rows above must not pass by accident: every rule error and every
// command type appears in the table (both lists come from the room's own
// registries, so a new command or rule error needs its rows).
func TestDecideRulesCoverEveryErrorAndCommand(t *testing.T) {
	errs := map[error]bool{}
	types := map[string]bool{}
	for _, r := range rules() {
		if r.err != nil {
			errs[r.err] = true
		}
		types[r.cmd.Type] = true
	}
	for _, e := range append(room.RuleErrors(), errclass.Invalid) {
		if !errs[e] {
			t.Errorf("no row expects %v", e)
		}
	}
	for _, c := range room.CommandTypes() {
		if !types[c] {
			t.Errorf("no row decides %s", c)
		}
	}
}

// Decide must not share memory with the command: the grain may reuse the
// command's slices.
func TestDecideCreateCopiesAdmins(t *testing.T) {
	ids := []string{"b", "a"}
	evs, err := room.Decide(room.NewState(tApp, tRoom), create("owner", admins(ids...)))
	if err != nil {
		t.Fatal(err)
	}
	ids[0] = "mutated"
	if got := evs[0].(room.RoomCreated).AdminUserIDs; !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("admins %v", got)
	}
}

func TestMutates(t *testing.T) {
	for _, c := range room.CommandTypes() {
		if c != room.CmdHeartbeat && !room.Mutates(c) {
			t.Errorf("%s must be logged", c)
		}
	}
	if room.Mutates(room.CmdHeartbeat) {
		t.Error("Heartbeat must not be logged")
	}
}
