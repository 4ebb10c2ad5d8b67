package room

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// The command log stores a command's seq and events, not the room view:
// the stored reply keeps one size however big the room gets, and a
// duplicate is still answered with the room summary (as it is now) besides
// the recorded seq and events. A reply never lists the members.
func TestStoredReplyIsSeqAndEventsAndDuplicateCarriesTheRoom(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	var sizes []int
	var firstJoin *v1.CommandReply
	for i := range 50 {
		r := f.mustDo(pid, rcJoin(fmt.Sprint("j", i), fmt.Sprint("user", i)))
		if i == 0 {
			firstJoin = r
		}
		if got := r.GetRoom().GetMemberCount(); got != int64(i+2) || len(r.GetRoom().GetMembers()) != 0 {
			t.Fatalf("join %d answered member_count %d and %d members listed, want %d and none", i, got, len(r.GetRoom().GetMembers()), i+2)
		}
		user := fmt.Sprint("user", i)
		if len(r.Events) != 1 || r.Events[0].EventType != TypeRoomUserJoined || r.Events[0].EventId != r.EventIds[0] ||
			!strings.Contains(r.Events[0].Payload, `"`+user+`"`) {
			t.Fatalf("join %d reply events %v, want the one RoomUserJoined of %s", i, r.Events, user)
		}
	}
	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		var stored v1.CommandReply
		if err := proto.Unmarshal(rec.Reply, &stored); err != nil {
			t.Fatal(err)
		}
		if stored.Room != nil || stored.RoomSeq != rec.Seq || len(stored.EventIds) != len(rec.Events) || len(stored.Events) != len(rec.Events) {
			t.Fatalf("seq %d stored %+v, want seq and %d events, no room", rec.Seq, &stored, len(rec.Events))
		}
		if rec.CommandType == CmdJoinRoom {
			sizes = append(sizes, len(rec.Reply))
		}
	}
	if sizes[len(sizes)-1] > sizes[0]+6 { // seq, event id and user id digits may grow
		t.Fatalf("stored reply grew with the room: %d bytes at 1 member, %d at 50", sizes[0], sizes[len(sizes)-1])
	}
	again := f.mustDo(pid, rcJoin("j0", "user0"))
	if !again.Duplicate || again.RoomSeq != firstJoin.RoomSeq || again.EventIds[0] != firstJoin.EventIds[0] {
		t.Fatalf("duplicate %+v, want the recorded seq %d and events of %+v", again, firstJoin.RoomSeq, firstJoin.EventIds)
	}
	if again.Room == nil || again.Room.MemberCount != 51 || again.Room.Seq != 51 || !proto.Equal(again.Events[0], firstJoin.Events[0]) {
		t.Fatalf("duplicate's room %+v events %v, want the room now (51 members, seq 51) and the first reply's events", again.Room, again.Events)
	}
	// A new activation answers from the log the same way.
	again2 := f.mustDo(f.activate("app/r1"), rcJoin("j0", "user0"))
	if !again2.Duplicate || again2.RoomSeq != firstJoin.RoomSeq || again2.GetRoom().GetMemberCount() != 51 {
		t.Fatalf("duplicate after reactivation: %+v", again2)
	}
}
