// Package roomcheck is what tests of room grains share without a grain
// of their own: the request wrapped as the grain protocol's command, a
// stored command's events decoded, and the seat rules checked over a
// room's whole command log. It imports no grain, so the grain's own tests
// and its observers' tests (through roomgrain/graintest) both use it.
package roomcheck

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Wrap puts a request into the grain protocol's oneof.
func Wrap(m proto.Message) *v1.RoomCommand {
	rc := &v1.RoomCommand{}
	fields := rc.ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message().FullName() == m.ProtoReflect().Descriptor().FullName() {
			rc.ProtoReflect().Set(f, protoreflect.ValueOfMessage(m.ProtoReflect()))
			return rc
		}
	}
	panic(fmt.Sprintf("Wrap: %T is in no oneof field", m))
}

// CheckSeatLog replays the command log of room app/r1 and checks the
// seat rules at every seq: no seat taken while held, no user on two
// seats, every application and invitation ending once. drained: no
// request may be pending at the end. It fails t if the log did not
// exercise the requests (a race too short to test anything).
func CheckSeatLog(t testing.TB, store persistence.RoomStore, drained bool) {
	t.Helper()
	recs, err := store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState("app", "r1")
	type key struct {
		kind, user string
	}
	pending := map[key]bool{}
	made, ended, taken := 0, 0, 0
	outcomes := map[string]int{}
	releases := map[string]int{}
	for _, r := range recs {
		evs, err := persistence.DecodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		cur := s
		for _, e := range evs {
			switch e := e.(type) {
			case room.RoomMicTaken:
				if cur.Seats[e.Seat] != "" || cur.SeatOf(e.UserID) >= 0 || !cur.IsMember(e.UserID) {
					t.Fatalf("seq %d: %s took seat %d held by %q (their seat %d)", r.Seq, e.UserID, e.Seat, cur.Seats[e.Seat], cur.SeatOf(e.UserID))
				}
				taken++
			case room.RoomMicReleased:
				releases[e.Reason]++
			case room.RoomSeatApplied:
				k := key{"app", e.UserID}
				if pending[k] {
					t.Fatalf("seq %d: second pending application of %s", r.Seq, e.UserID)
				}
				pending[k] = true
				made++
			case room.RoomSeatInvited:
				k := key{"inv", e.UserID}
				if pending[k] {
					t.Fatalf("seq %d: second pending invitation of %s", r.Seq, e.UserID)
				}
				pending[k] = true
				made++
			case room.RoomSeatApplicationEnded:
				k := key{"app", e.UserID}
				if !pending[k] {
					t.Fatalf("seq %d: application of %s ended twice or never made (%s)", r.Seq, e.UserID, e.Outcome)
				}
				delete(pending, k)
				ended++
				outcomes["app:"+e.Outcome]++
			case room.RoomSeatInvitationEnded:
				k := key{"inv", e.UserID}
				if !pending[k] {
					t.Fatalf("seq %d: invitation of %s ended twice or never made (%s)", r.Seq, e.UserID, e.Outcome)
				}
				delete(pending, k)
				ended++
				outcomes["inv:"+e.Outcome]++
			}
			cur = room.Apply(cur, e)
		}
		s.ApplyInPlace(r.Seq, evs)
		seen := map[string]int{}
		for i, u := range s.Seats {
			if u == "" {
				continue
			}
			if j, dup := seen[u]; dup {
				t.Fatalf("seq %d: %s on seats %d and %d", r.Seq, u, j, i)
			}
			seen[u] = i
		}
	}
	if drained && len(pending) != 0 {
		t.Fatalf("%d requests never ended: %v", len(pending), pending)
	}
	t.Logf("%d commands, %d seat takes, %d requests made, %d ended: %v; seat releases by reason %v", len(recs), taken, made, ended, outcomes, releases)
	if made < 100 || releases[room.ReasonMoved] == 0 || releases[room.ReasonKickedOffSeat] == 0 || outcomes["app:"+room.OutcomeApproved] == 0 || outcomes["app:"+room.OutcomeExpired] == 0 || outcomes["inv:"+room.OutcomeAccepted] == 0 {
		t.Fatalf("the race did not exercise the requests: %d made, outcomes %v", made, outcomes)
	}
}
