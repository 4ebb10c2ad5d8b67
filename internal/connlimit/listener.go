package connlimit

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits are a listener's caps; 0 turns one off.
type Limits struct {
	// MaxConnections caps the connections open at once.
	MaxConnections int
	// MaxPerAddress caps the connections open at once from one client IP.
	MaxPerAddress int
	// ShedIdleAfter: at MaxConnections, when every address holds a single
	// connection, the least recently active one is closed for the
	// newcomer if it has moved no byte for this long (else the newcomer
	// is refused); 0 = 1s. While some address holds several, one of its
	// is closed whatever its activity.
	ShedIdleAfter time.Duration
	// LogEvery is the least time between two "limit reached" lines of
	// one listener; 0 = 10s.
	LogEvery time.Duration
}

// Metrics are the instruments of every limited listener of a process.
type Metrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	shed    *prometheus.CounterVec
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
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_listener_shed_total",
			Help: "Open connections a listener at max_connections closed to admit a new one (from the address holding the most, else the longest idle).",
		}, []string{"listener"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.refused, m.shed} {
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
	shedCount     prometheus.Counter

	mu    sync.Mutex
	total int
	// byAddr holds the open connections by client address.
	byAddr map[string]map[*conn]struct{}
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
	if limits.ShedIdleAfter <= 0 {
		limits.ShedIdleAfter = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Listener{Listener: l, name: name, limits: limits, log: log, now: time.Now,
		byAddr: map[string]map[*conn]struct{}{}, sinceLog: map[string]int{}}
	if m != nil {
		w.open = m.open.WithLabelValues(name)
		w.refusedTotal = m.refused.WithLabelValues(name, "total")
		w.refusedPerAdr = m.refused.WithLabelValues(name, "per_address")
		w.shedCount = m.shed.WithLabelValues(name)
	}
	return w
}

// Accept returns the next connection within the limits. At the total
// cap it closes an open one to make room (shed) rather than refuse the
// newcomer: an idle flood from many addresses must not lock new clients
// out. One past the per-address cap is closed and Accept waits for the
// next. Errors are the inner listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		nc := &conn{Conn: c, l: l, addr: hostOf(c.RemoteAddr())}
		nc.last.Store(l.now().UnixNano())
		limit, victim := l.admitConn(nc)
		if victim != nil && victim.Conn != nil {
			_ = victim.Conn.Close() // its slot is already the newcomer's
		}
		if limit != "" {
			_ = c.Close()
			continue
		}
		return nc, nil
	}
}

// admit is admitConn for a connection from addr (tests).
func (l *Listener) admit(addr string) string {
	limit, _ := l.admitConn(&conn{l: l, addr: addr})
	return limit
}

// admitConn takes a slot for c, or names the limit that refuses it; at
// the total cap it frees the slot of a victim (shed) for c, the victim's
// closing left to the caller.
func (l *Listener) admitConn(c *conn) (limit string, victim *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	switch {
	case l.limits.MaxPerAddress > 0 && len(l.byAddr[c.addr]) >= l.limits.MaxPerAddress:
		limit = "per_address"
	case l.limits.MaxConnections > 0 && l.total >= l.limits.MaxConnections:
		if victim = l.victimLocked(c.addr, now); victim == nil {
			limit = "total"
		} else {
			l.releaseLocked(victim)
			l.sinceLog["shed"]++
			if l.shedCount != nil {
				l.shedCount.Inc()
			}
		}
	}
	if limit == "" {
		l.total++
		set := l.byAddr[c.addr]
		if set == nil {
			set = map[*conn]struct{}{}
			l.byAddr[c.addr] = set
		}
		set[c] = struct{}{}
		if l.open != nil {
			l.open.Inc()
		}
		if victim != nil {
			l.logLocked(now, c.addr)
		}
		return "", victim
	}
	if m := map[string]prometheus.Counter{"total": l.refusedTotal, "per_address": l.refusedPerAdr}[limit]; m != nil {
		m.Inc()
	}
	l.sinceLog[limit]++
	l.logLocked(now, c.addr)
	return limit, nil
}

// victimLocked picks the connection to shed for a newcomer from addr:
// the least recently active of the address holding the most, when addr
// holds fewer even with the newcomer (a flooding address's newcomer is
// refused: churning the flood would cost a handshake each); when every
// address holds one, the least recently active if it has been idle
// ShedIdleAfter; nil when none may go.
func (l *Listener) victimLocked(addr string, now time.Time) *conn {
	var top map[*conn]struct{}
	for _, set := range l.byAddr {
		if len(set) > len(top) {
			top = set
		}
	}
	pick := func(set map[*conn]struct{}) *conn {
		var v *conn
		for c := range set {
			if v == nil || c.last.Load() < v.last.Load() {
				v = c
			}
		}
		return v
	}
	if len(top) > 1 {
		if len(l.byAddr[addr])+1 >= len(top) {
			return nil
		}
		return pick(top)
	}
	var v *conn
	for _, set := range l.byAddr {
		if c := pick(set); c != nil && (v == nil || c.last.Load() < v.last.Load()) {
			v = c
		}
	}
	if v == nil || now.Sub(time.Unix(0, v.last.Load())) < l.limits.ShedIdleAfter {
		return nil
	}
	return v
}

// logLocked writes the limit line at most once per LogEvery.
func (l *Listener) logLocked(now time.Time, addr string) {
	if now.Sub(l.lastLog) < l.limits.LogEvery {
		return
	}
	l.lastLog = now
	l.log.Warn("listener connection limit reached: refusing or shedding connections", "listener", l.name,
		"refused_total_limit", l.sinceLog["total"], "refused_per_address_limit", l.sinceLog["per_address"],
		"shed", l.sinceLog["shed"],
		"max_connections", l.limits.MaxConnections, "max_connections_per_address", l.limits.MaxPerAddress,
		"last_address", addr, "open", l.total, "since", l.limits.LogEvery.String())
	clear(l.sinceLog)
}

func (l *Listener) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

// releaseLocked gives c's slot back, once.
func (l *Listener) releaseLocked(c *conn) {
	set := l.byAddr[c.addr]
	if _, ok := set[c]; !ok {
		return
	}
	delete(set, c)
	if len(set) == 0 {
		delete(l.byAddr, c.addr)
	}
	l.total--
	if l.open != nil {
		l.open.Dec()
	}
}

// Open is how many connections are open, in total and from addr.
func (l *Listener) Open(addr string) (total, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, len(l.byAddr[addr])
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

// conn gives its slot back on the first Close, and records when a byte
// last moved (which connection is idle when one must be shed).
type conn struct {
	net.Conn
	l    *Listener
	addr string
	last atomic.Int64 // unix nanos of the last read or write
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.last.Store(c.l.now().UnixNano())
	}
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.last.Store(c.l.now().UnixNano())
	}
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}
