package tencentcb

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floodServer serves h the way the HTTP listener does: read timeouts
// bound a slow body.
func floodServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = time.Second
	srv.Config.ReadTimeout = time.Second
	srv.Config.IdleTimeout = 30 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestTRTCFloodIsBoundedAndUnsignedChangeNothing: 10,000 requests from 32
// clients at once, half signed callbacks and half unsigned or forged, with
// 10 MB bodies (declared and chunked) and bodies that stall: the heap
// stays bounded, every unsigned one is refused without reaching a room,
// every signed one is taken once, big bodies are refused, stalled ones
// are cut by the read timeout.
func TestTRTCFloodIsBoundedAndUnsignedChangeNothing(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	srv := floodServer(t, newTRTC(t, m))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const total = 10_000
	var signed, okSigned, refusedUnsigned, big, bigRefused atomic.Int64
	var peak atomic.Uint64
	bigBody := bytes.Repeat([]byte("x"), 10<<20)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c := callback{typ: 203, roomID: gid, user: fmt.Sprintf("s%d", i), unique: int64(i), atMs: t0 + int64(i)}
				body := c.body()
				var req *http.Request
				switch i % 10 {
				case 0, 1, 2, 3, 4:
					signed.Add(1)
					req, _ = http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
					req.Header.Set("Sign", sign(testKey, body))
				case 5, 6:
					req, _ = http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
				case 7, 8:
					req, _ = http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
					req.Header.Set("Sign", sign("forged", body))
				default:
					big.Add(1)
					var r io.Reader = bytes.NewReader(bigBody)
					if i%20 == 9 {
						r = io.MultiReader(r) // no Content-Length: chunked
					}
					req, _ = http.NewRequest(http.MethodPost, srv.URL, r)
					req.Header.Set("Sign", sign(testKey, body))
				}
				req.Header.Set("SdkAppId", fmt.Sprint(testApp))
				resp, err := client.Do(req)
				if err != nil {
					if i%10 == 9 {
						bigRefused.Add(1) // the server may close before it is all sent
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case i%10 < 5 && resp.StatusCode == 200:
					okSigned.Add(1)
				case i%10 >= 5 && i%10 < 9 && resp.StatusCode == http.StatusUnauthorized:
					refusedUnsigned.Add(1)
				case i%10 == 9 && resp.StatusCode == http.StatusRequestEntityTooLarge:
					bigRefused.Add(1)
				}
				if i%200 == 0 {
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
				}
			}
		}()
	}
	// Stalled bodies alongside: a body promised and never sent.
	var stalled sync.WaitGroup
	var cut atomic.Int64
	for range 20 {
		stalled.Add(1)
		go func() {
			defer stalled.Done()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nSign: %s\r\nContent-Length: 1000\r\n\r\n{\"EventType\":", sign(testKey, []byte("x")))
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(conn)
			if len(b) == 0 || !strings.Contains(string(b), " 200 ") {
				cut.Add(1)
			}
		}()
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	stalled.Wait()

	if got, want := refusedUnsigned.Load(), int64(total*4/10); got != want {
		t.Fatalf("%d unsigned or forged refused with 401, want %d", got, want)
	}
	if okSigned.Load() != signed.Load() {
		t.Fatalf("%d of %d signed callbacks answered 200", okSigned.Load(), signed.Load())
	}
	if bigRefused.Load() != big.Load() {
		t.Fatalf("%d of %d 10 MB bodies refused", bigRefused.Load(), big.Load())
	}
	if cut.Load() != 20 {
		t.Fatalf("%d of 20 stalled bodies cut", cut.Load())
	}
	// Only the signed ones reached the room, each once: one removal each
	// (publishing without being a member).
	if calls := m.calls.Load(); calls != signed.Load() {
		t.Fatalf("%d commands reached the room, want the %d signed callbacks", calls, signed.Load())
	}
	var users []string
	for _, e := range effects(m, "r1") {
		users = append(users, strings.Fields(e)[1])
	}
	sort.Strings(users)
	for _, u := range users {
		if !strings.HasPrefix(u, "s") {
			t.Fatalf("effect for %s", u)
		}
		var i int
		fmt.Sscanf(u, "s%d", &i)
		if i%10 >= 5 {
			t.Fatalf("an unsigned or forged request (%d) changed the room", i)
		}
	}
	if int64(len(users)) != signed.Load() {
		t.Fatalf("%d removals, want %d", len(users), signed.Load())
	}
	if grew := int64(peak.Load()) - int64(before.HeapInuse); grew > 64<<20 {
		t.Fatalf("heap grew %d MB under the flood", grew>>20)
	}
	t.Logf("heap in use: %d MB before, %d MB peak", before.HeapInuse>>20, peak.Load()>>20)
}
