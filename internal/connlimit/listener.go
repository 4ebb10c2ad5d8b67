package connlimit

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits are a listener's caps; 0 turns one off.
type Limits struct {
	// MaxConnections caps the connections open at once.
	MaxConnections int
	// MaxPerAddress caps the connections open at once from one client IP.
	MaxPerAddress int
	// LogEvery is the least time between two "limit reached" lines of
	// one listener; 0 = 10s.
	LogEvery time.Duration
}

// Metrics are the instruments of every limited listener of a process.
type Metrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "roomcell_listener_connections",
			Help: "Connections open on a listener (grpc, http).",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_listener_refused_total",
			Help: "Connections a listener closed at once because a limit was reached (limit: total or per_address).",
		}, []string{"listener", "limit"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("connlimit: register metrics: %w", err)
		}
	}
	return m, nil
}

// Listener is a net.Listener that enforces Limits.
type Listener struct {
	net.Listener
	name   string
	limits Limits
	log    *slog.Logger
	now    func() time.Time

	open          prometheus.Gauge
	refusedTotal  prometheus.Counter
	refusedPerAdr prometheus.Counter

	mu      sync.Mutex
	total   int
	perAddr map[string]int
	// refused since the last log line, by limit; lastLog is that line.
	sinceLog map[string]int
	lastLog  time.Time
}

// Wrap limits l. name labels its metrics and log lines; m may be nil
// (nothing recorded), log nil (slog.Default()).
func Wrap(l net.Listener, name string, limits Limits, m *Metrics, log *slog.Logger) *Listener {
	if limits.LogEvery <= 0 {
		limits.LogEvery = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Listener{Listener: l, name: name, limits: limits, log: log, now: time.Now,
		perAddr: map[string]int{}, sinceLog: map[string]int{}}
	if m != nil {
		w.open = m.open.WithLabelValues(name)
		w.refusedTotal = m.refused.WithLabelValues(name, "total")
		w.refusedPerAdr = m.refused.WithLabelValues(name, "per_address")
	}
	return w
}

// Accept returns the next connection within the limits; one past them is
// closed and Accept waits for the next. Errors are the inner listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := hostOf(c.RemoteAddr())
		if limit := l.admit(addr); limit != "" {
			_ = c.Close()
			continue
		}
		return &conn{Conn: c, l: l, addr: addr}, nil
	}
}

// admit takes a slot for addr, or names the limit that refuses it.
func (l *Listener) admit(addr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := ""
	switch {
	case l.limits.MaxConnections > 0 && l.total >= l.limits.MaxConnections:
		limit = "total"
	case l.limits.MaxPerAddress > 0 && l.perAddr[addr] >= l.limits.MaxPerAddress:
		limit = "per_address"
	}
	if limit == "" {
		l.total++
		l.perAddr[addr]++
		if l.open != nil {
			l.open.Inc()
		}
		return ""
	}
	if c := map[string]prometheus.Counter{"total": l.refusedTotal, "per_address": l.refusedPerAdr}[limit]; c != nil {
		c.Inc()
	}
	l.sinceLog[limit]++
	if now := l.now(); now.Sub(l.lastLog) >= l.limits.LogEvery {
		l.lastLog = now
		l.log.Warn("listener connection limit reached: refusing connections", "listener", l.name,
			"refused_total_limit", l.sinceLog["total"], "refused_per_address_limit", l.sinceLog["per_address"],
			"max_connections", l.limits.MaxConnections, "max_connections_per_address", l.limits.MaxPerAddress,
			"last_address", addr, "open", l.total, "since", l.limits.LogEvery.String())
		clear(l.sinceLog)
	}
	return limit
}

func (l *Listener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perAddr[addr]--; l.perAddr[addr] <= 0 {
		delete(l.perAddr, addr)
	}
	if l.open != nil {
		l.open.Dec()
	}
}

// Open is how many connections are open, in total and from addr.
func (l *Listener) Open(addr string) (total, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.perAddr[addr]
}

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// conn gives its slot back once, on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	addr string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
