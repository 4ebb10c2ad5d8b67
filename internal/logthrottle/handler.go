package logthrottle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RepeatedKey is the attribute that carries how many identical records
// were held back since the last one written.
const RepeatedKey = "repeated"

// maxKeys bounds the remembered keys; past it, keys idle for an interval
// are forgotten.
const maxKeys = 4096

// Handler holds back a record, at any level, when one with the same key
// was written less than an interval ago. The next one written after the
// interval carries RepeatedKey with the number held back. A record with
// an "error" or "err" attribute is keyed by level, message and the
// error's root cause (the end of its Unwrap chain), not the logger's
// attributes, its other attributes or the full text, so one outage seen
// by many rooms and events is one key: its first line shows the full
// error and the room. A record without one is keyed by level, message
// and its own attributes: only exact repeats are held back, while lines
// that differ in what they report (a shutdown step, a member) all pass.
// The lines written per second are thus bounded by the number of keys,
// not by the traffic that produces them.
type Handler struct {
	next slog.Handler
	st   *state
}

type state struct {
	mu       sync.Mutex
	interval time.Duration
	now      func() time.Time
	seen     map[string]*entry
	swept    time.Time // last sweep of idle keys, at most one per interval
}

type entry struct {
	written time.Time
	held    int
}

// New wraps next; interval <= 0 means 10s.
func New(next slog.Handler, interval time.Duration) *Handler {
	return newWithClock(next, interval, time.Now)
}

func newWithClock(next slog.Handler, interval time.Duration, now func() time.Time) *Handler {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	return &Handler{next: next, st: &state{interval: interval, now: now, seen: map[string]*entry{}}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs implements slog.Handler; the derived handler shares the
// counts, so a repeat is caught whichever logger wrote it.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), st: h.st}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), st: h.st}
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	cause, ok := errorCause(r)
	if !ok {
		cause = attrsText(r)
	}
	held, write := h.st.admit(r.Level.String() + "\x00" + r.Message + "\x00" + cause)
	if !write {
		return nil
	}
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(RepeatedKey, held))
	}
	return h.next.Handle(ctx, r)
}

// admit reports whether the record of key is written now and how many
// were held back before it.
func (s *state) admit(key string) (held int, write bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.seen[key]; ok {
		if now.Sub(e.written) < s.interval {
			e.held++
			return 0, false
		}
		held = e.held
		e.written, e.held = now, 0
		return held, true
	}
	if len(s.seen) >= maxKeys && now.Sub(s.swept) >= s.interval {
		s.swept = now
		for k, e := range s.seen {
			if now.Sub(e.written) >= s.interval {
				delete(s.seen, k)
			}
		}
	}
	if len(s.seen) < maxKeys {
		s.seen[key] = &entry{written: now}
	}
	return 0, true
}

// errorCause returns the root-cause text of the record's "error" or
// "err" attribute.
func errorCause(r slog.Record) (string, bool) {
	var cause string
	var found bool
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "error" && a.Key != "err" {
			return true
		}
		found = true
		v := a.Value.Resolve()
		err, isErr := v.Any().(error)
		if v.Kind() != slog.KindAny || !isErr || err == nil {
			cause = v.String()
			return false
		}
		for {
			next := errors.Unwrap(err)
			if next == nil {
				break
			}
			err = next
		}
		cause = fmt.Sprintf("%T:%s", err, err.Error())
		return false
	})
	return cause, found
}

// attrsText is the record's own attributes as text, the key of a record
// without an error.
func attrsText(r slog.Record) string {
	if r.NumAttrs() == 0 {
		return ""
	}
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(a.Value.Resolve().String())
		b.WriteByte(0)
		return true
	})
	return b.String()
}
