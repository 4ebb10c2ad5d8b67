package roomim

import "testing"

// RoomOfGroup undoes GroupID for readable ids and refuses everything else:
// a callback about a group must reach exactly the room that owns it.
func TestRoomOfGroup(t *testing.T) {
	for _, c := range []struct{ app, room string }{{"lalu", "r1"}, {"a-b", "room_with_under"}, {"x", "y-z_9"}} {
		app, rid, ok := RoomOfGroup(GroupID(c.app, c.room))
		if !ok || app != c.app || rid != c.room {
			t.Errorf("RoomOfGroup(GroupID(%q,%q)) = %q %q %v", c.app, c.room, app, rid, ok)
		}
	}
	for _, gid := range []string{GroupID("app.dots", "r"), "nounderscore", "_r", "a_", "@TGS#2J4SZEAEL", "a_b c", "h-0123"} {
		if app, rid, ok := RoomOfGroup(gid); ok {
			t.Errorf("RoomOfGroup(%q) = %q %q, want refused", gid, app, rid)
		}
	}
}
