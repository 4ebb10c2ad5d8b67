package roomgrain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/room"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// The command log stores a command's reply as its seq alone (the events
// are the row's own), not the room view: the stored reply keeps one size
// however big the room gets, and a duplicate is still answered with the
// room summary (as it is now) besides the recorded seq and events. A reply
// never lists the members.
func TestStoredReplyIsSeqAndDuplicateCarriesEventsAndTheRoom(t *testing.T) {
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
		if len(r.Events) != 1 || r.Events[0].EventType != room.TypeRoomUserJoined || r.Events[0].EventId != r.EventIds[0] ||
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
		if stored.Room != nil || stored.RoomSeq != rec.Seq || len(stored.EventIds) != 0 || len(stored.Events) != 0 || len(rec.Events) == 0 {
			t.Fatalf("seq %d stored %+v with %d events in the row, want the seq alone", rec.Seq, &stored, len(rec.Events))
		}
		if rec.CommandType == room.CmdJoinRoom {
			sizes = append(sizes, len(rec.Reply))
		}
	}
	if sizes[len(sizes)-1] > sizes[0]+1 { // the seq's varint may grow
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

// Rows stored before the reply was the seq alone carry their events in the
// reply too: a duplicate of one is answered with those, as recorded.
func TestDuplicateOfARowWithEventsInItsReply(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	first := f.mustDo(pid, rcJoin("j0", "user0"))
	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := newFixture(t)
	for _, rec := range recs {
		ids, events := replyEvents(rec.Events)
		events[0].Payload = fmt.Sprintf(`{"recorded":%d}`, rec.Seq) // tells the stored events from the row's
		if rec.Reply, err = proto.Marshal(&v1.CommandReply{RoomSeq: rec.Seq, EventIds: ids, Events: events}); err != nil {
			t.Fatal(err)
		}
		if err := old.store.Append(context.Background(), persistence.Append{Command: rec}); err != nil {
			t.Fatal(err)
		}
	}
	again := old.mustDo(old.activate("app/r1"), rcJoin("j0", "user0"))
	if !again.Duplicate || again.RoomSeq != first.RoomSeq || len(again.EventIds) != 1 || again.EventIds[0] != first.EventIds[0] ||
		again.Events[0].Payload != `{"recorded":2}` || again.GetRoom().GetMemberCount() != 2 {
		t.Fatalf("duplicate of an old row: %+v, want seq %d, its recorded event and the room of 2", again, first.RoomSeq)
	}
}
