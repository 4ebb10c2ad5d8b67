package memdb

import (
	"context"
	"errors"
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
