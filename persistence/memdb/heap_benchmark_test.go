package memdb

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// heapRooms is how many rooms the heap benchmarks create per store: enough
// that the radix trees' shared upper levels are a rounding error.
const heapRooms = 20000

// liveHeap is the heap of live objects after a full collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// createRoom writes what a CreateRoom command leaves in the store of a dev
// node: the command log row (seq 1, its stored reply the seq alone),
// RoomCreated and the owner's RoomUserJoined leased to the room's
// publisher, then both marked published once IM took them. Sizes follow a
// real CreateRoom of `roomctl bench`.
func createRoom(ctx context.Context, s *Store, i int, nowMs int64) error {
	key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("bench-%d", i)}
	cmdID := fmt.Sprintf("bench-create-%d", i)
	owner := fmt.Sprintf("owner-%d", i)
	ev := func(n int, typ, payload string) persistence.Envelope {
		return persistence.Envelope{
			EventID: fmt.Sprintf("%s:%s:1:%d", key.AppCode, key.RoomID, n), EventType: typ,
			AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: 1, CommandID: cmdID,
			CreatedAtMs: nowMs, Payload: json.RawMessage(payload),
		}
	}
	events := []persistence.Envelope{
		ev(0, "RoomCreated", fmt.Sprintf(`{"owner_user_id":%q,"name":"bench","mic_seats":8,"admin_user_ids":null,"created_at_ms":%d}`, owner, nowMs)),
		ev(1, "RoomUserJoined", fmt.Sprintf(`{"user_id":%q,"joined_at_ms":%d}`, owner, nowMs)),
	}
	// The stored reply is the seq alone, as actors/roomgrain marshals it
	// (RoomSeq 1: two bytes).
	reply := []byte{0x08, 0x01}
	err := s.Append(ctx, persistence.Append{
		Command: persistence.CommandRecord{
			AppCode: key.AppCode, RoomID: key.RoomID, Seq: 1, CommandID: cmdID, CommandType: "CreateRoom",
			RequestHash: strings.Repeat("ab", 32), Reply: reply, Events: events, CreatedAtMs: nowMs,
		},
		Lease: &persistence.OutboxLease{Owner: "local-1/" + key.AppCode + "/" + key.RoomID, UntilMs: nowMs + 30000},
	})
	if err != nil {
		return err
	}
	return s.MarkOutboxPublishedBatch(ctx, []string{events[0].EventID, events[1].EventID}, nowMs+5)
}

// BenchmarkStoreHeapPerRoom reports the live heap the room store keeps per
// one-member room (bytes/room, after a full GC): the memory figure,
// for the part persistence/memdb owns.
func BenchmarkStoreHeapPerRoom(b *testing.B) {
	ctx := context.Background()
	var perRoom float64
	for b.Loop() {
		before := liveHeap()
		s := New()
		for i := range heapRooms {
			if err := createRoom(ctx, s, i, int64(1_700_000_000_000+i)); err != nil {
				b.Fatal(err)
			}
		}
		perRoom = float64(liveHeap()-before) / heapRooms
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perRoom, "bytes/room")
}

// BenchmarkDirectoryHeapPerRoom reports the live heap the dev-mode
// directory keeps per listed one-member room: the room's listing entry,
// its owner's user → room entry and presence.
func BenchmarkDirectoryHeapPerRoom(b *testing.B) {
	ctx := context.Background()
	var perRoom float64
	for b.Loop() {
		before := liveHeap()
		d := NewDirectory(DirectoryOptions{})
		for i := range heapRooms {
			key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("bench-%d", i)}
			owner := fmt.Sprintf("owner-%d", i)
			now := int64(1_700_000_000_000 + i)
			if _, err := d.SetUserRoom(ctx, key, owner, now); err != nil {
				b.Fatal(err)
			}
			if err := d.Heartbeat(ctx, key, owner, now); err != nil {
				b.Fatal(err)
			}
			if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: key.AppCode, RoomID: key.RoomID, Name: "bench",
				OwnerUserID: owner, MemberCount: 1, Heat: int64(i % 7), UpdatedAtMs: now}); err != nil {
				b.Fatal(err)
			}
		}
		perRoom = float64(liveHeap()-before) / heapRooms
		runtime.KeepAlive(d)
	}
	b.ReportMetric(perRoom, "bytes/room")
}
