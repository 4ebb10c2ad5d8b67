package logthrottle

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

func setup() (*slog.Logger, *syncBuf, *clock) {
	buf, c := &syncBuf{}, &clock{t: time.Unix(1_700_000_000, 0)}
	h := newWithClock(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}), 10*time.Second, c.now)
	return slog.New(h), buf, c
}

var errRefused = errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")

// An outage seen by many rooms at once from many goroutines is one line
// per interval, and the next line counts every record held back.
func TestOutageIsOneLinePerIntervalWithCount(t *testing.T) {
	log, buf, c := setup()
	const workers, each = 16, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl := log.With("room_id", fmt.Sprint("r", w))
			for i := range each {
				rl.Warn("room append failed", "seq", i, "error", fmt.Errorf("append r%d seq %d: %w", w, i, errRefused))
			}
		}()
	}
	wg.Wait()
	if l := buf.lines(); len(l) != 1 || !strings.Contains(l[0], "connection refused") || strings.Contains(l[0], RepeatedKey) {
		t.Fatalf("%d lines for %d identical failures, want 1 without a count:\n%s", len(l), workers*each, strings.Join(l, "\n"))
	}
	c.add(5 * time.Second)
	log.Warn("room append failed", "error", fmt.Errorf("x: %w", errRefused))
	if l := buf.lines(); len(l) != 1 {
		t.Fatalf("a repeat inside the interval was written: %v", l)
	}
	c.add(6 * time.Second)
	log.Warn("room append failed", "error", fmt.Errorf("y: %w", errRefused))
	l := buf.lines()
	if want := fmt.Sprintf("%s=%d", RepeatedKey, workers*each); len(l) != 2 || !strings.Contains(l[1], want) {
		t.Fatalf("after the interval: %v, want a second line with %s", l, want)
	}
	c.add(11 * time.Second)
	log.Warn("room append failed", "error", errRefused)
	if l := buf.lines(); len(l) != 3 || strings.Contains(l[2], RepeatedKey) {
		t.Fatalf("a lone repeat after a quiet interval: %v, want no count", l)
	}
}

// Only repeats are held back: other causes, messages, levels, and
// records without an error that differ in their attributes all pass; an
// exact repeat is held back at every level.
func TestDistinctRecordsPass(t *testing.T) {
	log, buf, _ := setup()
	for i := range 3 {
		log.Warn("room append failed", "error", errRefused)
		log.Warn("room append failed", "error", errors.New("deadlock found"))
		log.Error("room append failed", "error", errRefused)
		log.Warn("room load failed", "err", errRefused)
		log.Info("rpc", "error", errRefused)
		log.Warn("room publish backlog full", "events", 3)
		log.Debug("tick")
		log.Info("shutdown step done", "step", fmt.Sprint("step-", i))
	}
	// 7 keys once each (5 by error, 2 exact repeats); 3 distinct steps.
	if l := buf.lines(); len(l) != 7+3 {
		t.Fatalf("%d lines, want 10:\n%s", len(l), strings.Join(l, "\n"))
	}
}

// An IM outage at a steady command rate: every event logs the same three
// INFO/WARN lines (with its own event fields on the logger). The lines
// written per second stay at a constant set by the number of distinct
// lines, not by the rate: the same at 100 and at 1,000 commands/s.
func TestOutageLinesPerSecondDoNotGrowWithTheRate(t *testing.T) {
	imDown := errors.New("tencent im: 503 service unavailable")
	linesIn30s := func(rate int) int {
		log, buf, c := setup()
		const seconds = 30
		for s := range seconds {
			for i := range rate {
				ev := log.With("event_id", fmt.Sprintf("app:r%d:%d:0", i%50, s*rate+i), "room_id", fmt.Sprint("r", i%50))
				ev.Info("room im send failed", "events", 1, "error", fmt.Errorf("send: %w", imDown))
				ev.Info("outbox event publish failed", "retry_count", s, "status", "pending", "error", fmt.Errorf("publish: %w", imDown))
				ev.Warn("outbox publish failed", "retry_count", s, "error", imDown)
				c.add(time.Second / time.Duration(rate))
			}
		}
		return len(buf.lines())
	}
	slow, fast := linesIn30s(100), linesIn30s(1000)
	// 3 keys, one line each per 10 s interval: 3 x (30/10 + 1) at most,
	// against 90,000 records at 1,000/s.
	if bound := 3 * (30/10 + 1); fast > bound || slow > bound || fast != slow {
		t.Fatalf("lines in 30 s: %d at 100/s, %d at 1000/s; want the same constant (<= %d) at both rates", slow, fast, bound)
	}
}

func TestKeysStayBounded(t *testing.T) {
	log, buf, c := setup()
	h := log.Handler().(*Handler)
	for i := range 3 * maxKeys {
		log.Warn("m", "error", fmt.Sprint("cause ", i))
		if i == maxKeys {
			c.add(time.Minute)
		}
	}
	if n := len(buf.lines()); n != 3*maxKeys {
		t.Fatalf("%d lines for %d distinct causes: a distinct record was dropped", n, 3*maxKeys)
	}
	if n := len(h.st.seen); n > maxKeys {
		t.Fatalf("%d keys remembered, bound %d", n, maxKeys)
	}
}
