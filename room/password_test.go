package room_test

import (
	"strings"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

var testKey = []byte(strings.Repeat("k", 32))

// setPassword is SetRoomPassword as the grain hands it to Decide: the
// verifier under salt "s1" instead of the password.
func setPassword(op, password string) room.Command {
	return cmd(room.CmdSetRoomPassword, op, func(c *room.Command) {
		c.PasswordSaltNew, c.PasswordMAC = "s1", room.PasswordMAC(testKey, "s1", password)
	})
}
func clearPassword(op string) room.Command {
	return cmd(room.CmdSetRoomPassword, op, func(c *room.Command) { c.ClearPassword = true })
}

// joinWith is JoinRoom offering password, as the grain hands it on.
func joinWith(user, password string) room.Command {
	return cmd(room.CmdJoinRoom, user, func(c *room.Command) { c.PasswordMAC = room.PasswordMAC(testKey, "s1", password) })
}

func passwordRules() []rule {
	locked := then(aRoom, setPassword("owner", "open sesame"))
	verifier := room.Verifier{Salt: "s1", MAC: room.PasswordMAC(testKey, "s1", "open sesame")}
	return []rule{
		{name: "password: an admin sets it; the event carries the verifier only", given: aRoom, cmd: setPassword("admin", "open sesame"),
			want: []room.Event{room.RoomPasswordChanged{Set: true, Sealed: verifier, OperatorUserID: "admin"}}},
		{name: "password: a member may not set it", given: aRoom, cmd: setPassword("alice", "x"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "password: without a verifier (no key on the node)", given: aRoom, cmd: cmd(room.CmdSetRoomPassword, "owner", func(c *room.Command) { c.Password = "x" }),
			err: room.ErrPasswordsOff, class: errclass.Precondition},
		{name: "password: cleared", given: locked, cmd: clearPassword("owner"), want: []room.Event{room.RoomPasswordChanged{OperatorUserID: "owner"}}},
		{name: "password: clearing none is a no-op", given: aRoom, cmd: clearPassword("owner")},
		invalid("password: neither a password nor clear", aRoom, cmd(room.CmdSetRoomPassword, "owner"), "password is required"),
		invalid("password: a password with clear", aRoom, cmd(room.CmdSetRoomPassword, "owner", func(c *room.Command) { c.ClearPassword, c.Password = true, "x" }), "with clear"),
		invalid("password: too long", aRoom, cmd(room.CmdSetRoomPassword, "owner", func(c *room.Command) { c.Password = strings.Repeat("p", 65) }), "at most 64"),
		{name: "password: the right one joins", given: locked, cmd: joinWith("carol", "open sesame"),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "password: a wrong one is refused", given: locked, cmd: joinWith("carol", "open sesam"), err: room.ErrWrongPassword, class: errclass.Permission},
		{name: "password: none is refused", given: locked, cmd: join("carol"), err: room.ErrWrongPassword, class: errclass.Permission},
		{name: "password: an admin away needs none", given: then(locked, leave("admin")), cmd: join("admin"),
			want: []room.Event{room.RoomUserJoined{UserID: "admin", JoinedAtMs: t0}}},
		{name: "password: the owner needs none", given: then(locked, leave("owner")), cmd: join("owner"),
			want: []room.Event{room.RoomUserJoined{UserID: "owner", JoinedAtMs: t0}}},
		{name: "password: the banned stay banned with the right one", given: then(locked, banUser("owner", "carol", 60)), cmd: joinWith("carol", "open sesame"),
			err: room.ErrBanned, class: errclass.Precondition},
		{name: "password: cleared, anyone joins", given: then(locked, clearPassword("admin")), cmd: join("carol"),
			want: []room.Event{room.RoomUserJoined{UserID: "carol", JoinedAtMs: t0}}},
		{name: "password: a new one replaces the old", given: then(locked, setPassword("owner", "new")), cmd: joinWith("carol", "open sesame"),
			err: room.ErrWrongPassword, class: errclass.Permission},
	}
}
