package tencentcb

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkTRTCCallbackAnswer posts signed callbacks over HTTP at a paced
// 2,000 a second for two seconds per iteration (enters and exits of 200
// members of 20 rooms, each a room command) and reports the answers'
// p50 and p99. The rooms are in memory: the figure is the endpoint's
// (verification, decoding, the command's dedupe and decision), not a
// store's. Run: go test -run X -bench TRTCCallbackAnswer -benchtime 1x ./tencentcb/
func BenchmarkTRTCCallbackAnswer(b *testing.B) {
	const rate, dur = 2000, 2 * time.Second
	m := newMemRooms(t0)
	var gids []string
	for r := range 20 {
		gids = append(gids, seatedRoom(b, m, fmt.Sprintf("b%d", r)))
	}
	srv := floodServer(b, newTRTC(b, m))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var all []time.Duration
	seq := 0
	for range b.N {
		n := int(float64(rate) * dur.Seconds())
		lat := make([]time.Duration, n)
		work := make(chan int, n)
		var wg sync.WaitGroup
		// A pool of keep-alive clients, as Tencent's callback servers
		// hold connections; the sends are paced, each timed from its send.
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					c := callback{typ: 103 + i%2, roomID: gids[i%len(gids)], user: "alice", unique: int64(seq + i), atMs: t0 + int64(seq+i)}
					body := c.body()
					req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
					req.Header.Set("Sign", sign(testKey, body))
					req.Header.Set("SdkAppId", fmt.Sprint(testApp))
					t := time.Now()
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 200 {
						b.Errorf("callback %d: %v", i, err)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat[i] = time.Since(t)
				}
			}()
		}
		start := time.Now()
		for i := range n {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
			work <- i
		}
		close(work)
		wg.Wait()
		seq += n
		all = append(all, lat...)
	}
	slices.Sort(all)
	p := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTRTCCallbackHandler is one callback through the handler alone,
// no network and no pacing: verification, decoding, the command and the
// in-memory room's decision. The CPU a callback costs, against which
// BenchmarkTRTCCallbackAnswer's p99 tells queueing from work.
func BenchmarkTRTCCallbackHandler(b *testing.B) {
	m := newMemRooms(t0)
	var gids []string
	for r := range 20 {
		gids = append(gids, seatedRoom(b, m, fmt.Sprintf("h%d", r)))
	}
	h := newTRTC(b, m)
	i := 0
	for b.Loop() {
		c := callback{typ: 103 + i%2, roomID: gids[i%len(gids)], user: "alice", unique: int64(i), atMs: t0 + int64(i)}
		body := c.body()
		if code := post(h, body, sign(testKey, body)); code != http.StatusOK {
			b.Fatalf("callback %d: %d", i, code)
		}
		i++
	}
}
