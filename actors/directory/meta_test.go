package directory

import (
	"slices"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// A room's metadata reaches its directory entry when it changes; a
// closed room leaves the listing and its reopen lists it again, with
// the same metadata.
func TestDirectoryListsMetadataAcrossAReopen(t *testing.T) {
	d := newDirFixture(t, 0)
	d.room("r1")
	d.mustExec(create("r1", "c1", "o1"))
	waitFor(t, func() bool { return len(d.listing()) == 1 })
	d.mustExec(&v1.RoomCommand{Command: &v1.RoomCommand_SetRoomMetadata{SetRoomMetadata: &v1.SetRoomMetadataRequest{
		CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "o1",
		Category: "music", Tags: []string{"jazz"}, CoverUrl: "https://cdn/r1.png", Visibility: "unlisted"}}})
	want := persistence.RoomMeta{Category: "music", Tags: []string{"jazz"}, CoverURL: "https://cdn/r1.png", Visibility: "unlisted"}
	hasMeta := func() bool {
		l := d.listing()
		if len(l) != 1 {
			return false
		}
		m := l[0].MetaOf()
		return m.Category == want.Category && slices.Equal(m.Tags, want.Tags) && m.CoverURL == want.CoverURL && m.Visibility == want.Visibility
	}
	waitFor(t, hasMeta)
	d.mustExec(closeRoom("r1", "x1", "o1"))
	waitFor(t, func() bool { return len(d.listing()) == 0 })
	d.mustExec(&v1.RoomCommand{Command: &v1.RoomCommand_ReopenRoom{ReopenRoom: &v1.ReopenRoomRequest{
		CommandId: "o1", AppCode: "app", RoomId: "r1", UserId: "o1"}}})
	waitFor(t, hasMeta)
}
