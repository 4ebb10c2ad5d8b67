package main

import (
	"context"
	"log/slog"
)

// uniqueKeys is a slog handler that writes each top-level key once per
// line: a package that adds "component" or "node_id" to a logger that
// already carries it (the process logger has node_id; a store's logger
// has its component) would otherwise print the key twice, and a log
// pipeline keeps one of the two at random. The first value wins: it is
// the outer, process-wide one.
type uniqueKeys struct {
	inner slog.Handler
	// seen is the keys the logger's With attrs hold; shared, never
	// written after the handler is built.
	seen map[string]bool
	// grouped: after WithGroup, keys are scoped to the group and cannot
	// clash with the outer ones; the handler passes them through.
	grouped bool
}

func newUniqueKeys(h slog.Handler) slog.Handler {
	return &uniqueKeys{inner: h, seen: map[string]bool{}}
}

func (u *uniqueKeys) Enabled(ctx context.Context, l slog.Level) bool { return u.inner.Enabled(ctx, l) }

func (u *uniqueKeys) Handle(ctx context.Context, r slog.Record) error {
	if u.grouped {
		return u.inner.Handle(ctx, r)
	}
	dup := false
	var keys map[string]bool
	r.Attrs(func(a slog.Attr) bool {
		if u.seen[a.Key] {
			dup = true
			return false
		}
		if keys == nil {
			keys = map[string]bool{}
		}
		if keys[a.Key] {
			dup = true
			return false
		}
		keys[a.Key] = true
		return true
	})
	if !dup {
		return u.inner.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	keys = map[string]bool{}
	r.Attrs(func(a slog.Attr) bool {
		if !u.seen[a.Key] && !keys[a.Key] {
			keys[a.Key] = true
			out.AddAttrs(a)
		}
		return true
	})
	return u.inner.Handle(ctx, out)
}

func (u *uniqueKeys) WithAttrs(attrs []slog.Attr) slog.Handler {
	if u.grouped {
		return &uniqueKeys{inner: u.inner.WithAttrs(attrs), seen: u.seen, grouped: true}
	}
	seen := make(map[string]bool, len(u.seen)+len(attrs))
	for k := range u.seen {
		seen[k] = true
	}
	keep := attrs[:0:0]
	for _, a := range attrs {
		if !seen[a.Key] {
			seen[a.Key] = true
			keep = append(keep, a)
		}
	}
	return &uniqueKeys{inner: u.inner.WithAttrs(keep), seen: seen}
}

func (u *uniqueKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return u
	}
	return &uniqueKeys{inner: u.inner.WithGroup(name), seen: u.seen, grouped: true}
}
