package mysql

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// BenchmarkAppendEpochFence measures what the epoch fence costs a group-
// committed append (one more multi-row upsert per batch and a row lock per
// room): 64 rooms, group commit on, unfenced (epoch 0) and fenced appends
// interleaved over 5 rounds of b.N appends each on one store, so the
// machine's noise hits both alike. Reports the median cmds/s of each and
// their ratio.
func BenchmarkAppendEpochFence(b *testing.B) {
	cfg, _ := mysqltest.NewDatabase(b)
	cfg.QueryTimeout = 5 * time.Second
	groupCommit(true)(&cfg)
	s, err := Open(context.Background(), cfg, WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	state := make([]byte, 2048)
	const rooms, rounds = 64, 5
	var run atomic.Int64
	measure := func(epoch int64) float64 {
		prefix := fmt.Sprintf("r%d", run.Add(1))
		var taken atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for r := range rooms {
			wg.Go(func() {
				key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("%s-%d", prefix, r)}
				for seq := int64(1); taken.Add(1) <= int64(b.N); seq++ {
					a := benchAppend(key, seq, state)
					a.Epoch = epoch
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := s.Append(ctx, a)
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(b.N) / time.Since(start).Seconds()
	}
	var off, on []float64
	b.ResetTimer()
	for range rounds {
		off = append(off, measure(0))
		on = append(on, measure(7))
	}
	b.StopTimer()
	slices.Sort(off)
	slices.Sort(on)
	b.ReportMetric(off[rounds/2], "unfenced_cmds/s")
	b.ReportMetric(on[rounds/2], "fenced_cmds/s")
	b.ReportMetric(on[rounds/2]/off[rounds/2], "fenced/unfenced")
}
