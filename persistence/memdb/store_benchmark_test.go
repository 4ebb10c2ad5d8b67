package memdb

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// BenchmarkAppend measures the room grain's write path: one command with
// two events (two outbox rows), a snapshot every 50 commands.
func BenchmarkAppend(b *testing.B) {
	s := New()
	ctx := context.Background()
	key := persistence.RoomKey{AppCode: "bench", RoomID: "room-1"}
	payload := json.RawMessage(`{"user_id":"u-1","seat":3,"gift_id":"rose","count":1}`)
	reply := []byte(`{"ok":true,"seq":0}`)
	state := make([]byte, 2048)
	b.ReportAllocs()
	var seq int64
	for b.Loop() {
		seq++
		cmdID := fmt.Sprintf("cmd-%d", seq)
		ev := func(n int) persistence.Envelope {
			return persistence.Envelope{
				EventID: fmt.Sprintf("%s-%d", cmdID, n), EventType: "RoomGiftSent",
				AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CommandID: cmdID,
				CreatedAtMs: seq, Payload: payload,
			}
		}
		a := persistence.Append{Command: persistence.CommandRecord{
			AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: cmdID,
			CommandType: "SendGift", Reply: reply, CreatedAtMs: seq,
			Events: []persistence.Envelope{ev(0), ev(1)},
		}}
		if seq%50 == 0 {
			a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, State: state, UpdatedAtMs: seq}
		}
		if err := s.Append(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendConcurrent is many rooms' grains appending at once (one
// command with one event each, as a join): with write groups (the store)
// and with a transaction per append (as before the groups).
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		b.Run(fmt.Sprintf("grouped=%v", grouped), func(b *testing.B) {
			s := New()
			s.writes.alone = !grouped
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(16) // 32 writers on two cores, as ghz -c 32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				room := fmt.Sprintf("room-%d", next.Add(1))
				var seq int64
				for pb.Next() {
					seq++
					id := fmt.Sprintf("%s:%d", room, seq)
					a := persistence.Append{Command: persistence.CommandRecord{AppCode: "bench", RoomID: room, Seq: seq, CommandID: id,
						CommandType: "JoinRoom", CreatedAtMs: seq, Events: []persistence.Envelope{{EventID: id + ":0", EventType: "RoomUserJoined",
							AppCode: "bench", RoomID: room, RoomSeq: seq, CommandID: id, CreatedAtMs: time.Now().UnixMilli(), Payload: []byte(`{"user_id":"u"}`)}}}}
					if err := s.Append(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
