package directory

import (
	"context"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// A room renamed by UpdateRoom shows its new name in the directory's
// listing (ListRooms) without waiting for a refresh; an announcement-only
// update leaves the listing alone.
func TestDirectoryListsTheNewNameAfterUpdateRoom(t *testing.T) {
	d := newDirFixture(t, time.Hour) // no periodic refresh to hide a missed update
	d.room("r1")
	d.mustExec(create("r1", "c1", "owner"))
	listedName := func() string {
		p, _ := d.dir.ListRooms(context.Background(), "app", 0, 10)
		if len(p.Rooms) != 1 {
			return ""
		}
		return p.Rooms[0].Name
	}
	waitFor(t, func() bool { return listedName() == "Room r1" })
	d.mustExec(&v1.RoomCommand{Command: &v1.RoomCommand_UpdateRoom{UpdateRoom: &v1.UpdateRoomRequest{
		CommandId: "u1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "Renamed 改名"}}})
	waitFor(t, func() bool { return listedName() == "Renamed 改名" })
	ann := "hello"
	reply := d.mustExec(&v1.RoomCommand{Command: &v1.RoomCommand_UpdateRoom{UpdateRoom: &v1.UpdateRoomRequest{
		CommandId: "u2", AppCode: "app", RoomId: "r1", UserId: "owner", Announcement: &ann}}})
	if reply.GetRoom().GetAnnouncement() != "hello" || listedName() != "Renamed 改名" {
		t.Fatalf("after the announcement: view %v, listed %q", reply.GetRoom(), listedName())
	}
}
