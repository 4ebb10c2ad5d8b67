package connlimit

import (
	"fmt"
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
	// Other addresses fill the total: 3 more, then one more is refused.
	for i := range 4 {
		c := dialFrom(t, fmt.Sprintf("127.0.3.%d", i+1), addr)
		if want := i == 3; closedByPeer(c) != want {
			t.Fatalf("connection from address %d: closed %v, want %v", i, !want, want)
		}
	}
	if total, from := l.Open("127.0.0.2"); total != 6 || from != 3 {
		t.Fatalf("open %d total, %d from the first address; want 6 and 3", total, from)
	}
	if got := value(m.open.WithLabelValues("grpc")); got != 6 {
		t.Fatalf("open gauge %v", got)
	}
	if p, tot := value(m.refused.WithLabelValues("grpc", "per_address")), value(m.refused.WithLabelValues("grpc", "total")); p != 2 || tot != 1 {
		t.Fatalf("refused per_address %v total %v; want 2 and 1", p, tot)
	}
	// One line for the period, however many were refused.
	if n := strings.Count(logs.String(), "listener connection limit reached"); n != 1 {
		t.Fatalf("%d limit lines in one period, want 1:\n%s", n, logs.String())
	}
	// A closed connection gives its slot back.
	(<-accepted).Close()
	time.Sleep(10 * time.Millisecond)
	if total, _ := l.Open(""); total != 5 {
		t.Fatalf("open after a close: %d, want 5", total)
	}
	c := dialFrom(t, "127.0.4.1", addr)
	if closedByPeer(c) {
		t.Fatal("a freed slot was not given to the next connection")
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
