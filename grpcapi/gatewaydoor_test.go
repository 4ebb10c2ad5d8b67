package grpcapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// errorBody is the project's JSON error: the gRPC status with its code.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	} `json:"details"`
}

// reason is the ErrorInfo reason of a JSON error, "" when it has none.
func reason(t *testing.T, body string) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body is not the JSON status: %v\n%s", err, body)
	}
	for _, d := range e.Details {
		if d.Domain == errorDomain {
			return d.Reason
		}
	}
	return ""
}

// rssBytes is this process's resident set (Linux).
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

var (
	zeros   = make([]byte, 64<<10)
	zeroChk = append([]byte(fmt.Sprintf("%x\r\n", len(zeros))), append(zeros, '\r', '\n')...)
)

// rawPost sends a POST of size bytes (chunked when !withLength) to addr
// over its own connection, writing the body while it waits for the
// answer, and returns the answer's status and how long it took to come.
func rawPost(addr, path, token string, size int, withLength bool) (int, string, time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, "", 0, err
	}
	defer c.Close()
	start := time.Now()
	head := "POST " + path + " HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if withLength {
		head += fmt.Sprintf("Content-Length: %d\r\n", size)
	} else {
		head += "Transfer-Encoding: chunked\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		return 0, "", 0, err
	}
	go func() {
		// The body, until it is all sent or the server closes.
		for sent := 0; sent < size; sent += len(zeros) {
			chunk := zeros
			if !withLength {
				chunk = zeroChk
			}
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	took := time.Since(start)
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, string(b), took, nil
}

// 100 unauthenticated 10 MB bodies at once: each is answered 401 within
// a second without being read, and the process does not grow by their
// size; an authenticated caller's oversized body is 413 whether it says
// its length or not; no answer is a 429 or carries grpc-go's text.
func TestGatewayRefusesBodiesBeforeReadingThem(t *testing.T) {
	base, b := startGateway(t)
	addr := strings.TrimPrefix(base, "http://")
	const n, size = 100, 10 << 20
	runtime.GC()
	before := rssBytes(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := rssBytes(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	type answer struct {
		code   int
		reason string
		took   time.Duration
		err    error
	}
	run := func(token string, withLength bool) []answer {
		out := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				code, body, took, err := rawPost(addr, "/api/v1/rooms/create", token, size, withLength)
				out[i] = answer{code: code, took: took, err: err}
				if err == nil {
					out[i].reason = reason(t, body)
					if strings.Contains(body, "grpc:") {
						out[i].err = fmt.Errorf("grpc-go's text in %s", body)
					}
				}
			})
		}
		wg.Wait()
		return out
	}
	// 1 s; the race detector makes every step several times slower.
	bound := time.Second
	if raceBuild {
		bound = 4 * time.Second
	}
	check := func(name string, got []answer, wantCode int, wantReason string) {
		t.Helper()
		var slowest time.Duration
		for i, a := range got {
			if a.err != nil || a.code != wantCode || a.reason != wantReason || a.took > bound {
				t.Fatalf("%s #%d: %d %s in %s (%v), want %d %s within %s", name, i, a.code, a.reason, a.took, a.err, wantCode, wantReason, bound)
			}
			slowest = max(slowest, a.took)
		}
		t.Logf("%s: %d × %d MiB answered %d %s, slowest in %s", name, n, size>>20, wantCode, wantReason, slowest.Round(time.Millisecond))
	}
	check("unauthenticated", run("", true), http.StatusUnauthorized, "UNAUTHENTICATED")
	check("unauthenticated chunked", run("", false), http.StatusUnauthorized, "UNAUTHENTICATED")
	check("authenticated, length said", run(clientTok, true), http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE")
	check("authenticated, chunked", run(clientTok, false), http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE")
	close(stop)
	<-sampled
	grew := peak.Load() - before
	t.Logf("RSS %d MiB before, peak growth %d MiB over %d bodies of %d MiB", before>>20, grew>>20, 4*n, size>>20)
	// 50 MiB; the race detector's shadow memory multiplies what any
	// allocation costs (5 to 10 times, its documentation says).
	limit := int64(50 << 20)
	if raceBuild {
		limit *= 8
	}
	if grew > limit {
		t.Fatalf("RSS grew %d MiB, want at most %d", grew>>20, limit>>20)
	}
	if len(b.calls()) != 0 {
		t.Fatalf("a refused body reached the server: %d calls", len(b.calls()))
	}
	// A body just under the cap still passes.
	name := strings.Repeat("n", 60<<10)
	code, out, _ := httpDo(t, "POST", base+"/api/v1/rooms/create", clientTok,
		`{"command_id":"c1","app_code":"a","room_id":"r1","user_id":"u1","name":"`+name+`"}`)
	if code == http.StatusRequestEntityTooLarge || code == http.StatusTooManyRequests || strings.Contains(out, "grpc:") {
		t.Fatalf("a body under the cap: %d %s", code, out)
	}
}

// 50 bodies sent at 1 byte a second: each is answered 408
// REQUEST_TIMEOUT (or cut) by the read timeout, none held past it.
func TestGatewaySlowBodiesEndAtTheReadTimeout(t *testing.T) {
	const readTimeout = time.Second
	base, b := startGatewayWith(t, func(o *GatewayOptions) { o.ReadTimeout = readTimeout })
	addr := strings.TrimPrefix(base, "http://")
	const n = 50
	took := make([]time.Duration, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "POST /api/v1/rooms/create HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n", clientTok)
			go func() {
				for range 100 {
					if _, err := c.Write([]byte("{")); err != nil {
						return
					}
					time.Sleep(time.Second)
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				codes[i] = resp.StatusCode
				// The server closes the connection after its answer.
				_, _ = io.Copy(io.Discard, resp.Body)
				one := make([]byte, 1)
				if _, err := c.Read(one); err == nil {
					t.Errorf("slow body #%d: connection still open after the answer", i)
				}
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range n {
		if took[i] > readTimeout+time.Second || took[i] < readTimeout-100*time.Millisecond {
			t.Fatalf("slow body #%d ended after %s, want at the read timeout %s", i, took[i], readTimeout)
		}
		if codes[i] != 0 && codes[i] != http.StatusRequestTimeout {
			t.Fatalf("slow body #%d answered %d, want 408 or a closed connection", i, codes[i])
		}
	}
	if len(b.calls()) != 0 {
		t.Fatalf("a slow body reached the server: %d calls", len(b.calls()))
	}
	t.Logf("%d slow bodies ended in %s..%s", n, took[0].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
}

// Routing errors speak the project's JSON: a wrong method is 405 with
// Allow, an unknown route 404, broken JSON 400 BAD_BODY; an operator-only
// check and a missing token carry their codes too.
func TestGatewayRoutingErrorsInTheVocabulary(t *testing.T) {
	base, _ := startGateway(t)
	code, out, hdr := httpDo(t, "GET", base+"/api/v1/rooms/create", clientTok, "")
	if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" || reason(t, out) != "METHOD_NOT_ALLOWED" {
		t.Fatalf("GET on a POST route: %d Allow=%q %s", code, hdr.Get("Allow"), out)
	}
	code, out, hdr = httpDo(t, "DELETE", base+"/api/v1/rooms/get", clientTok, "")
	if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET" || reason(t, out) != "METHOD_NOT_ALLOWED" {
		t.Fatalf("DELETE on a GET route: %d Allow=%q %s", code, hdr.Get("Allow"), out)
	}
	// A form POST to a GET route is a wrong method too, not a read.
	req, _ := http.NewRequestWithContext(testCtx(t), "POST", base+"/api/v1/rooms/get", strings.NewReader("app_code=a&room_id=r"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+clientTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("form POST to a GET route: %d", resp.StatusCode)
	}
	if code, out, _ = httpDo(t, "GET", base+"/api/v1/nowhere", clientTok, ""); code != http.StatusNotFound || reason(t, out) != "NO_ROUTE" {
		t.Fatalf("unknown route: %d %s", code, out)
	}
	code, out, _ = httpDo(t, "POST", base+"/api/v1/rooms/create", clientTok, `{"command_id":`)
	if code != http.StatusBadRequest || reason(t, out) != "BAD_BODY" || strings.Contains(out, "grpc:") {
		t.Fatalf("broken JSON: %d %s", code, out)
	}
	code, out, _ = httpDo(t, "GET", base+"/api/v1/rooms/events?app_code=a&room_id=r1&after_room_seq=x", clientTok, "")
	if code != http.StatusBadRequest || reason(t, out) != "BAD_BODY" {
		t.Fatalf("a query field of the wrong type: %d %s", code, out)
	}
	code, out, hdr = httpDo(t, "POST", base+"/api/v1/rooms/create", "", `{}`)
	if code != http.StatusUnauthorized || reason(t, out) != "UNAUTHENTICATED" || strings.Contains(hdr.Get("Connection"), "keep") {
		t.Fatalf("no token: %d %s", code, out)
	}
	var e errorBody
	_ = json.Unmarshal([]byte(out), &e)
	if e.Code != 16 || e.Details[0].Metadata["code"] != "12001" {
		t.Fatalf("no token: the status is %+v", e)
	}
}

// A WatchRoom stream outlives the gateway's read and write timeouts; a
// command's reply does not need to.
func TestGatewayStreamOutlivesTimeouts(t *testing.T) {
	base, _ := startGatewayWith(t, func(o *GatewayOptions) {
		o.ReadTimeout, o.WriteTimeout = 400*time.Millisecond, 400*time.Millisecond
	})
	code, out, _ := httpDo(t, "GET", fmt.Sprintf("%s/api/v1/rooms/watch?app_code=a&room_id=r1&after_room_seq=%d", base, slowWatchAfter), clientTok, "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != http.StatusOK || len(lines) != slowWatchEvents+1 || !strings.Contains(lines[slowWatchEvents], "ROOM_WATCH_ENDED") {
		t.Fatalf("slow watch: %d, %d lines\n%s", code, len(lines), out)
	}
	if code, out, _ := httpDo(t, "GET", base+"/api/v1/rooms/get?app_code=a&room_id=r1", clientTok, ""); code != http.StatusOK {
		t.Fatalf("read after the watch: %d %s", code, out)
	}
}

// Every route of gateway.yaml names an RPC with an access class, and the
// rules' paths match as the mux routes them.
func TestGatewayRulesAreKnown(t *testing.T) {
	routes, err := loadGatewayRoutes(roomcellv1.GatewayRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.class == ClassNone {
			t.Errorf("%s %s: %s has no access class", r.method, strings.Join(r.path, "/"), r.rpc)
		}
	}
	if _, err := loadGatewayRoutes([]byte("http:\n  rules:\n  - {selector: roomcell.v1.RoomService.Nope, get: /x}\n")); err == nil {
		t.Fatal("a rule naming an unknown RPC loaded")
	}
	tmpl := gatewayRoute{path: strings.Split("api/v1/rooms/{room_id}/events", "/")}
	for path, want := range map[string]bool{
		"/api/v1/rooms/r1/events": true, "/api/v1/rooms//events": false, "/api/v1/rooms/r1": false, "/api/v1/rooms/r1/events/x": false,
	} {
		if tmpl.matches(path) != want {
			t.Errorf("%s matches %v", path, !want)
		}
	}
}
