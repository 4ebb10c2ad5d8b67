package relay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// backlog inserts n pending IM-bound rows without the testing.T helpers.
func backlog(b *testing.B, s persistence.Store, n int) {
	b.Helper()
	for i := range n {
		id := fmt.Sprintf("ev-%06d", i)
		env := persistence.Envelope{EventID: id, EventType: "RoomUserJoined", AppCode: "app", RoomID: "room-" + id,
			RoomSeq: 1, CommandID: "cmd-" + id, CreatedAtMs: clockBase + int64(i), Payload: []byte(`{"user_id":"u1","joined_at_ms":1}`)}
		if err := s.Append(context.Background(), persistence.Append{Command: persistence.CommandRecord{
			AppCode: "app", RoomID: env.RoomID, Seq: 1, CommandID: env.CommandID, CommandType: "JoinRoom",
			Events: []persistence.Envelope{env}, CreatedAtMs: env.CreatedAtMs}}); err != nil {
			b.Fatal(err)
		}
	}
}

type noopPublisher struct{}

func (noopPublisher) PublishRoomEvent(context.Context, persistence.Envelope) error { return nil }

// BenchmarkRelay drains a backlog of 5000 pending rows on memdb through
// the relay actor with a no-op publisher (batch_size 100, poll 1s: the
// drain mode, not the poll, sets the pace). Reports events/s.
func BenchmarkRelay(b *testing.B) {
	benchmarkDrain(b, 5000, func(b *testing.B) persistence.Store { return newMemDBB(b) })
}

func benchmarkDrain(b *testing.B, rows int, newStore func(b *testing.B) persistence.Store) {
	for b.Loop() {
		b.StopTimer()
		s := newStore(b)
		backlog(b, s, rows)
		sys := newSystemB(b)
		sup := newSupervisorB(b, sys)
		b.StartTimer()
		start := time.Now()
		r, err := Start(sup, Deps{Store: s, Publisher: noopPublisher{}, NodeID: "bench",
			Config: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: time.Second, BatchSize: 100})})
		if err != nil {
			b.Fatal(err)
		}
		for {
			st, err := s.OutboxStats(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if st.Pending == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "events/s")
		b.StopTimer()
		_ = r.Stop(5 * time.Second)
		_ = sup.Stop(5 * time.Second)
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkProcessBatch is one batch of 100 rows without the actor: claim,
// 100 no-op publishes, 100 marks, stats.
func BenchmarkProcessBatch(b *testing.B) {
	s := newMemDBB(b)
	backlog(b, s, 100*(b.N+1))
	deps := Deps{Store: s, Publisher: noopPublisher{}, NodeID: "bench", Config: configs.WithDefaults(configs.OutboxWorkerConfig{BatchSize: 100})}
	b.ResetTimer()
	for range b.N {
		res, err := ProcessBatch(context.Background(), deps)
		if err != nil || res.Published != 100 {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "events/s")
}
