package connlimit

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/internal/logtest"
)

// dialFrom connects to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server closed c (read EOF or reset)
// within a short wait.
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

func TestCapsPerAddressAndInTotal(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	l := Wrap(inner, "grpc", Limits{MaxConnections: 6, MaxPerAddress: 3, LogEvery: time.Hour}, m, slog.New(slog.NewTextHandler(&logs, nil)))
	defer l.Close()
	accepted := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	addr := inner.Addr().String()
	// One address: 3 held, the 4th and 5th closed at once.
	var first []net.Conn
	for range 5 {
		first = append(first, dialFrom(t, "127.0.0.2", addr))
	}
	for i, c := range first {
		if want := i >= 3; closedByPeer(c) != want {
			t.Fatalf("connection %d from one address: closed %v, want %v", i, !want, want)
		}
	}
	// Other addresses fill the total: 3 more; the one after is not
	// refused: the address holding the most gives up its least recently
	// active connection (the first: the others wrote since).
	for _, c := range first[1:3] {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // the server's side reads them
	for i := range 3 {
		c := dialFrom(t, fmt.Sprintf("127.0.3.%d", i+1), addr)
		if closedByPeer(c) {
			t.Fatalf("connection from address %d closed within the total", i)
		}
	}
	for range 3 {
		srv := <-accepted
		go func() { _, _ = io.Copy(io.Discard, srv) }() // the server's reads record activity
	}
	time.Sleep(20 * time.Millisecond)
	newcomer := dialFrom(t, "127.0.3.4", addr)
	if closedByPeer(newcomer) {
		t.Fatal("a newcomer at the total cap was refused; want a flood's connection shed for it")
	}
	if !closedByPeer(first[0]) || closedByPeer(first[1]) || closedByPeer(first[2]) {
		t.Fatal("the shed connection is not the flooding address's least recently active one")
	}
	if total, from := l.Open("127.0.0.2"); total != 6 || from != 2 {
		t.Fatalf("open %d total, %d from the first address; want 6 and 2", total, from)
	}
	if got := value(m.open.WithLabelValues("grpc")); got != 6 {
		t.Fatalf("open gauge %v", got)
	}
	if p, tot, shed := value(m.refused.WithLabelValues("grpc", "per_address")), value(m.refused.WithLabelValues("grpc", "total")), value(m.shed.WithLabelValues("grpc")); p != 2 || tot != 0 || shed != 1 {
		t.Fatalf("refused per_address %v total %v, shed %v; want 2, 0 and 1", p, tot, shed)
	}
	// One line for the period, however many were refused.
	if n := strings.Count(logs.String(), "listener connection limit reached"); n != 1 {
		t.Fatalf("%d limit lines in one period, want 1:\n%s", n, logs.String())
	}
	// A closed connection gives its slot back.
	(<-accepted).Close()
	time.Sleep(10 * time.Millisecond)
	(<-accepted).Close() // two of the other addresses' connections
	time.Sleep(10 * time.Millisecond)
	if total, _ := l.Open(""); total != 4 {
		t.Fatalf("open after two closes: %d, want 4", total)
	}
	c := dialFrom(t, "127.0.4.1", addr)
	if closedByPeer(c) {
		t.Fatal("a freed slot was not given to the next connection")
	}
}

// When every address holds one connection, the cap sheds the least
// recently active one only once it has been idle ShedIdleAfter; before,
// the newcomer is refused (a busy connection is never cut for it).
func TestShedsOnlyIdleWhenEveryAddressHoldsOne(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	l := Wrap(inner, "grpc", Limits{MaxConnections: 2, ShedIdleAfter: time.Second}, nil, slog.New(slog.DiscardHandler))
	now := time.Unix(100, 0)
	l.now = func() time.Time { return now }
	a, b := &conn{l: l, addr: "a"}, &conn{l: l, addr: "b"}
	a.last.Store(now.UnixNano())
	b.last.Store(now.Add(300 * time.Millisecond).UnixNano())
	for _, c := range []*conn{a, b} {
		if limit, _ := l.admitConn(c); limit != "" {
			t.Fatalf("within the cap: %s", limit)
		}
	}
	now = now.Add(900 * time.Millisecond)
	if limit, v := l.admitConn(&conn{l: l, addr: "c"}); limit != "total" || v != nil {
		t.Fatalf("all active within ShedIdleAfter: %q, shed %v; want refused", limit, v)
	}
	now = now.Add(200 * time.Millisecond) // a idle 1.1 s, b 0.8 s
	c := &conn{l: l, addr: "c"}
	c.last.Store(now.UnixNano())
	if limit, v := l.admitConn(c); limit != "" || v != a {
		t.Fatalf("a idle past ShedIdleAfter: %q, shed %v; want a shed for the newcomer", limit, v)
	}
	if total, fromA := l.Open("a"); total != 2 || fromA != 0 {
		t.Fatalf("after the shed: %d open, %d from a", total, fromA)
	}
	l.release(a) // the victim's own Close later changes nothing
	if total, _ := l.Open(""); total != 2 {
		t.Fatalf("a shed connection's close freed a slot twice: %d open", total)
	}
}

// The log line comes again after its period, counting what it refused.
func TestLimitLogOncePerPeriodWithCount(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	l := Wrap(inner, "http", Limits{MaxPerAddress: 1}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	for range 5 {
		l.admit("a")
	}
	now = now.Add(11 * time.Second)
	l.admit("a")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "refused_per_address_limit=1") || !strings.Contains(lines[1], "refused_per_address_limit=4") {
		t.Fatalf("limit lines:\n%s\nwant one at the first refusal and one after the period counting the 4 since", logs.String())
	}
}

// value reads a gauge or counter.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// At the total cap a newcomer from the address holding the most is
// refused (churning a flood would cost a handshake each), one from an
// address holding fewer takes the slot of that address's least recently
// active connection.
func TestFloodingAddressNewcomerRefusedOthersShed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	l := Wrap(inner, "grpc", Limits{MaxConnections: 3}, nil, slog.New(slog.DiscardHandler))
	now := time.Unix(100, 0)
	l.now = func() time.Time { return now }
	a1, a2, b1 := &conn{l: l, addr: "a"}, &conn{l: l, addr: "a"}, &conn{l: l, addr: "b"}
	a1.last.Store(now.Add(time.Second).UnixNano())
	a2.last.Store(now.UnixNano()) // a's least recently active
	for _, c := range []*conn{a1, a2, b1} {
		if limit, _ := l.admitConn(c); limit != "" {
			t.Fatal(limit)
		}
	}
	if limit, v := l.admitConn(&conn{l: l, addr: "a"}); limit != "total" || v != nil {
		t.Fatalf("newcomer from the top address: %q, shed %v; want refused", limit, v)
	}
	if limit, v := l.admitConn(&conn{l: l, addr: "b"}); limit != "total" || v != nil {
		t.Fatalf("newcomer that would tie the top address: %q, shed %v; want refused", limit, v)
	}
	if limit, v := l.admitConn(&conn{l: l, addr: "c"}); limit != "" || v != a2 {
		t.Fatalf("newcomer from a new address: %q, shed %v; want a's least recently active shed", limit, v)
	}
	if total, fromA := l.Open("a"); total != 3 || fromA != 1 {
		t.Fatalf("after: %d open, %d from a", total, fromA)
	}
}
