package memdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestRoomStoreContract(t *testing.T) {
	storetest.RunRoomStore(t, func(t *testing.T) persistence.Store {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestRoomFenceContract(t *testing.T) {
	storetest.RunRoomFence(t, func(t *testing.T) persistence.Store {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestOutboxStoreContract(t *testing.T) {
	storetest.RunOutboxStore(t, func(t *testing.T) persistence.Store {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestOutboxMQContract(t *testing.T) {
	storetest.RunOutboxMQ(t, func(t *testing.T) persistence.Store { return New(WithOutboxMQ()) },
		func(t *testing.T) persistence.Store { return New() })
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := New()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "a", RoomID: "r"}, 0)
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("LoadCommands after Close: got %v, want ErrUnavailable", err)
	}
	err = s.Append(context.Background(), persistence.Append{Command: persistence.CommandRecord{AppCode: "a", RoomID: "r", Seq: 1, CommandID: "c"}})
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("Append after Close: got %v, want ErrUnavailable", err)
	}
}

// go-memdb cannot index empty strings; an Append with an empty key would
// slip past the fences, so it is refused outright.
func TestAppendRejectsEmptyKeys(t *testing.T) {
	s := New()
	ok := persistence.CommandRecord{AppCode: "a", RoomID: "r", Seq: 1, CommandID: "c"}
	noEventID := ok
	noEventID.Events = []persistence.Envelope{{EventType: "RoomUserJoined"}}
	for name, c := range map[string]persistence.CommandRecord{
		"app_code":   {RoomID: "r", Seq: 1, CommandID: "c"},
		"room_id":    {AppCode: "a", Seq: 1, CommandID: "c"},
		"command_id": {AppCode: "a", RoomID: "r", Seq: 1},
		"event_id":   noEventID,
	} {
		if err := s.Append(context.Background(), persistence.Append{Command: c}); !errors.Is(err, errInvalid) {
			t.Errorf("Append without %s: got %v, want errInvalid", name, err)
		}
	}
	if err := s.Append(context.Background(), persistence.Append{Command: ok}); err != nil {
		t.Fatalf("a valid Append after rejected ones: %v", err)
	}
}

func TestSchemaRejectsDuplicateTable(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("newSchema accepted a duplicate table name")
		}
	}()
	newSchema(roomSnapshotsTable, roomSnapshotsTable)
}

// The claim collects candidate rooms a chunk at a time. Rooms that yield
// nothing (their first row held by another sender, their second free)
// must not end it early or reorder it: with three rooms of four held, a
// claim of 10 rows needs four chunks, one of them yielding nothing, and
// takes both rows of each of the first 5 free rooms, in due order; a
// second claim takes the next 5.
func TestClaimSkipsHeldRoomsAcrossChunks(t *testing.T) {
	ctx := context.Background()
	s := New()
	const rooms = 60
	for i := range rooms {
		room := fmt.Sprintf("r%02d", i)
		var evs []persistence.Envelope
		for n := range 2 {
			evs = append(evs, persistence.Envelope{EventID: fmt.Sprintf("%s:%d", room, n), EventType: "T",
				AppCode: "a", RoomID: room, RoomSeq: 1, CommandID: room, CreatedAtMs: int64(100 + i)})
		}
		if err := s.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "a", RoomID: room,
			Seq: 1, CommandID: room, Events: evs, CreatedAtMs: int64(100 + i)}}); err != nil {
			t.Fatal(err)
		}
		if i%4 != 0 {
			if _, err := s.ClaimRoomOutbox(ctx, persistence.RoomKey{AppCode: "a", RoomID: room}, "other", 1000, 10_000, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := range 2 {
		got, err := s.ClaimPendingOutbox(ctx, "me", 1000, 10_000, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.Envelope.EventID)
		}
		var want []string
		for i := 0; len(want) < 10; i += 4 {
			want = append(want, fmt.Sprintf("r%02d:0", 20*round+i), fmt.Sprintf("r%02d:1", 20*round+i))
		}
		want = want[:10]
		if !slices.Equal(ids, want) {
			t.Fatalf("claim %d: %v, want %v", round, ids, want)
		}
	}
}

func TestCommandRangeContract(t *testing.T) {
	storetest.RunCommandRange(t, func(*testing.T) storetest.CommandRanger { return New() })
}
