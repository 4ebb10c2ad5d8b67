package walletnotice_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// BenchmarkNoticeBacklogMariaDB is the notice throughput run: a
// backlog of WalletBalanceChanged rows in wallet_outbox on MariaDB drained
// by 1 or 2 notice instances (scan, ingest, claim, C2C send, mark) through
// the real Tencent IM client over loopback HTTP into the fake IM, with the
// client's rate limit raised (Tencent's default is 200 sendmsg/s per app).
// Run it once per case:
//
//	go test ./actors/notice/walletnotice -run '^$' -bench NoticeBacklogMariaDB -benchtime 1x
func BenchmarkNoticeBacklogMariaDB(b *testing.B) {
	for _, c := range []struct {
		events, instances, batch, lanes int
	}{
		{20_000, 1, 200, 16},
		{20_000, 1, 500, 32},
		{20_000, 2, 200, 16},
	} {
		b.Run(fmt.Sprintf("events=%d/instances=%d/batch=%d/lanes=%d", c.events, c.instances, c.batch, c.lanes), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				bl := newBacklog(b, c.events, 2000)
				cfg := backlogConfig()
				cfg.WalletNoticeWorker.BatchSize, cfg.WalletNoticeWorker.SendConcurrency = c.batch, c.lanes
				b.StartTimer()
				for i := range c.instances {
					bl.start(b, fmt.Sprint("notice-", i), cfg, 0)
				}
				took := bl.waitDelivered(b, 10*time.Minute)
				b.StopTimer()
				if d := bl.checkFake(b); d != 0 {
					b.Fatalf("%d duplicates", d)
				}
				b.ReportMetric(float64(c.events)/took.Seconds(), "notices/s")
				b.ReportMetric(float64(bl.fake.CallCount(tencentim.APISendMsg))/float64(c.events), "sendmsg/notice")
			}
		})
	}
}
