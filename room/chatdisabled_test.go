package room_test

import (
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func chatOff(op string, disabled bool) room.Command {
	return cmd(room.CmdSetChatDisabled, op, func(c *room.Command) { c.ChatDisabled = disabled })
}

func chatDisabledRules() []rule {
	off := then(aRoom, chatOff("admin", true))
	return []rule{
		{name: "chat disabled: an admin turns it on", given: aRoom, cmd: chatOff("admin", true),
			want: []room.Event{room.RoomChatDisabledChanged{Disabled: true, OperatorUserID: "admin"}}},
		{name: "chat disabled: on again is a no-op", given: off, cmd: chatOff("owner", true)},
		{name: "chat disabled: the owner turns it off", given: off, cmd: chatOff("owner", false),
			want: []room.Event{room.RoomChatDisabledChanged{OperatorUserID: "owner"}}},
		{name: "chat disabled: off when off is a no-op", given: aRoom, cmd: chatOff("admin", false)},
		{name: "chat disabled: a member may not", given: aRoom, cmd: chatOff("alice", true), err: room.ErrNotOwner, class: errclass.Permission},
	}
}

// Who may send chat: while the switch is on the owner and the admins
// only; a member's own mute holds whatever the switch, and outlives it.
func TestMaySendChat(t *testing.T) {
	on := given(t, then(aRoom, chatOff("owner", true))...)
	if !on.ChatDisabled() || !room.View(on).ChatDisabled {
		t.Fatal("switch on: not in the state or the view")
	}
	now := on.CreatedAtMs
	for user, want := range map[string]bool{"owner": true, "admin": true, "alice": false, "stranger": false} {
		if got := on.MaySendChat(user, now); got != want {
			t.Errorf("switch on: %s may send %v, want %v", user, got, want)
		}
	}
	s := given(t, then(aRoom, muteMember("owner", "alice", 60), chatOff("owner", true), chatOff("owner", false))...)
	now = s.CreatedAtMs
	if s.ChatDisabled() || s.MaySendChat("alice", now) || !s.MaySendChat("bob", now) {
		t.Fatalf("switch off: alice (muted) %v, bob %v", s.MaySendChat("alice", now), s.MaySendChat("bob", now))
	}
	if s := given(t, then(aRoom, chatOff("owner", true), chatOff("owner", false))...); s.Extra != nil {
		t.Fatalf("switch off leaves %+v", s.Extra)
	}
}
