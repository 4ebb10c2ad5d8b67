package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// BenchmarkOutboxClaimDrain drains a backlog of 100k pending rows in 1,000
// rooms (100 each, ages interleaved across rooms as under live load) into
// a no-op sink: claim 500 rows, mark them published in one write, again,
// until nothing is pending. "claim=before" is the claim as it was (one
// locking read per room), "claim=now" the current one; with -count N the
// two alternate, so both are measured on the same machine in the same run.
// claim-ms/op is the claim alone (the mark is the same write in both):
//
//	go test ./persistence/mysql -run '^$' -bench OutboxClaimDrain -benchtime 1x -count 3
func BenchmarkOutboxClaimDrain(b *testing.B) {
	const rows, rooms, batch = 100_000, 1000, 500
	for _, c := range []struct {
		name  string
		claim func(s *Store, ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error)
	}{
		{"claim=before", (*Store).claimBefore},
		{"claim=now", (*Store).ClaimPendingOutbox},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := newTestStore(b, nil)
				loadBacklog(b, s, rows, rooms)
				ctx := context.Background()
				claims := 0
				var claiming time.Duration
				b.StartTimer()
				start := time.Now()
				done := 0
				for {
					now := time.Now().UnixMilli()
					t0 := time.Now()
					got, err := c.claim(s, ctx, "bench", now, 30_000, batch)
					claiming += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 {
						break
					}
					claims++
					ids := make([]string, len(got))
					for i, r := range got {
						ids[i] = r.Envelope.EventID
					}
					if err := s.MarkOutboxPublishedBatch(ctx, ids, now); err != nil {
						b.Fatal(err)
					}
					done += len(got)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				if done != rows {
					b.Fatalf("drained %d rows, want %d", done, rows)
				}
				if st, err := s.OutboxStats(ctx); err != nil || st.Pending != 0 {
					b.Fatalf("after the drain: %+v %v", st, err)
				}
				b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
				b.ReportMetric(float64(claiming.Microseconds())/1000/float64(claims), "claim-ms/op")
			}
		})
	}
}

// BenchmarkOutboxMQClaimDrain is BenchmarkOutboxClaimDrain for the MQ
// fanout's claim: 20k MQ-pending rows in 200 rooms (100 each, ages
// interleaved), claimed 500 at a time and marked MQ-published, until none
// is left ("claim=now": the room claim, on room_outbox_mq):
//
//	go test ./persistence/mysql -run '^$' -bench OutboxMQClaimDrain -benchtime 1x -count 3
func BenchmarkOutboxMQClaimDrain(b *testing.B) {
	const rows, rooms, batch = 20_000, 200, 500
	for _, c := range []struct {
		name  string
		claim func(s *Store, ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error)
	}{
		{"claim=now", (*Store).ClaimOutboxMQ},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := newTestStore(b, nil, WithOutboxMQ(true))
				loadBacklog(b, s, rows, rooms)
				if _, err := s.db.Exec("INSERT INTO room_outbox_mq (event_id, app_code, room_id, room_seq, event_index, created_at_ms)" +
					" SELECT event_id, app_code, room_id, room_seq, event_index, created_at_ms FROM room_outbox"); err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				claims, done := 0, 0
				var claiming time.Duration
				b.StartTimer()
				start := time.Now()
				for {
					now := time.Now().UnixMilli()
					t0 := time.Now()
					got, err := c.claim(s, ctx, "bench", now, 30_000, batch)
					claiming += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 {
						break
					}
					claims++
					if err := s.MarkOutboxMQPublished(ctx, claimedIDs(got), now); err != nil {
						b.Fatal(err)
					}
					done += len(got)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				if done != rows {
					b.Fatalf("drained %d rows, want %d", done, rows)
				}
				b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
				b.ReportMetric(float64(claiming.Microseconds())/1000/float64(claims), "claim-ms/op")
			}
		})
	}
}

// loadBacklog writes n pending rows over rooms rooms with multi-row
// INSERTs: row i is room i%rooms, created at i ms, so every room's rows
// are spread over the whole backlog's age.
func loadBacklog(b testing.TB, s *Store, n, rooms int) {
	b.Helper()
	const chunk = 1000
	for at := 0; at < n; at += chunk {
		var q strings.Builder
		q.WriteString(insertOutbox)
		var args []any
		for i := at; i < min(n, at+chunk); i++ {
			room := fmt.Sprintf("r%04d", i%rooms)
			seq := int64(i/rooms + 1)
			env := persistence.Envelope{EventID: fmt.Sprintf("bench:%s:%d:0", room, seq), EventType: "RoomUserJoined",
				AppCode: "bench", RoomID: room, RoomSeq: seq, CommandID: fmt.Sprint("c", i), CreatedAtMs: int64(i),
				Payload: []byte(`{"user_id":"u","joined_at_ms":1}`)}
			raw, err := encodeEnvelope(env)
			if err != nil {
				b.Fatal(err)
			}
			if i > at {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?,'pending',0,NULL,0,0,?,?,0)")
			args = append(args, env.EventID, env.AppCode, env.RoomID, env.RoomSeq, env.EventType, raw, env.CreatedAtMs, env.CreatedAtMs)
		}
		if _, err := s.db.Exec(q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
}
