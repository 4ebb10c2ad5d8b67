package room_test

import (
	"fmt"
	"strings"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func setInfo(op string, set map[string]string, del ...string) room.Command {
	return cmd(room.CmdSetRoomCustomInfo, op, func(c *room.Command) { c.CustomSet, c.CustomDelete = set, del })
}

// keys returns n keys k00.. with values of size bytes.
func keys(from, n, size int) map[string]string {
	m := map[string]string{}
	for i := from; i < from+n; i++ {
		m[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", size)
	}
	return m
}

func customInfoRules() []rule {
	full := then(aRoom, setInfo("owner", keys(0, room.MaxCustomKeys, 1)))
	// 8 values of 2040 bytes + keys: 16,344 of the 16,384 bytes.
	big := then(aRoom, setInfo("owner", keys(0, 8, room.MaxCustomValueLen-8)))
	withTheme := then(aRoom, setInfo("owner", map[string]string{"theme": "dark", "pin": "https://x/y"}))
	return []rule{
		{name: "custom info: an admin sets keys; the event carries them", given: aRoom, cmd: setInfo("admin", map[string]string{"theme": "dark", "pin": "https://x/y"}),
			want: []room.Event{room.RoomCustomInfoChanged{Set: map[string]string{"theme": "dark", "pin": "https://x/y"}, OperatorUserID: "admin"}}},
		{name: "custom info: only the changed keys are carried, deletes of present keys", given: withTheme,
			cmd:  setInfo("owner", map[string]string{"theme": "dark", "lang": "zh"}, "pin", "absent"),
			want: []room.Event{room.RoomCustomInfoChanged{Set: map[string]string{"lang": "zh"}, Deleted: []string{"pin"}, OperatorUserID: "owner"}}},
		{name: "custom info: no change is a no-op", given: withTheme, cmd: setInfo("owner", map[string]string{"theme": "dark"}, "absent")},
		{name: "custom info: a member may not", given: aRoom, cmd: setInfo("alice", map[string]string{"theme": "dark"}), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "custom info: 32 keys is the limit", given: full, cmd: setInfo("owner", map[string]string{"k33": "x"}), err: room.ErrTooManyCustomKeys, class: errclass.Precondition},
		{name: "custom info: at the limit a key is replaced", given: full, cmd: setInfo("owner", map[string]string{"k00": "y"}),
			want: []room.Event{room.RoomCustomInfoChanged{Set: map[string]string{"k00": "y"}, OperatorUserID: "owner"}}},
		{name: "custom info: a delete makes room in the same change", given: full, cmd: setInfo("owner", map[string]string{"k99": "x"}, "k00"),
			want: []room.Event{room.RoomCustomInfoChanged{Set: map[string]string{"k99": "x"}, Deleted: []string{"k00"}, OperatorUserID: "owner"}}},
		{name: "custom info: the total is bounded", given: big, cmd: setInfo("owner", map[string]string{"k08": strings.Repeat("v", 40)}),
			err: room.ErrCustomInfoTooLarge, class: errclass.Precondition},
		{name: "custom info: up to the total", given: big, cmd: setInfo("owner", map[string]string{"k08": strings.Repeat("v", 37)}),
			want: []room.Event{room.RoomCustomInfoChanged{Set: map[string]string{"k08": strings.Repeat("v", 37)}, OperatorUserID: "owner"}}},
		invalid("custom info: nothing asked", aRoom, setInfo("owner", nil), "set or delete_keys"),
		invalid("custom info: a value too long", aRoom, setInfo("owner", map[string]string{"k": strings.Repeat("v", room.MaxCustomValueLen+1)}), "set[k]"),
		invalid("custom info: a bad key", aRoom, setInfo("owner", map[string]string{"a b": "v"}), "set key"),
		invalid("custom info: a control character", aRoom, setInfo("owner", map[string]string{"k": "a\x00"}), "set[k]"),
		invalid("custom info: a key set and deleted", aRoom, setInfo("owner", map[string]string{"k": "v"}, "k"), "delete_keys[0]"),
		invalid("custom info: 33 keys in one request", aRoom, setInfo("owner", keys(0, room.MaxCustomKeys+1, 1)), "at most 32"),
	}
}
