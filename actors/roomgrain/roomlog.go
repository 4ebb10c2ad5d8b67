package roomgrain

import (
	"context"
	"log/slog"

	"github.com/hyapp/roomcell/persistence"
)

// roomLogger is the node's logger with a room's app_code and room_id, as
// Logger.With would give, except that the two fields are added when a line
// is written instead of when the room starts: With on slog's text and JSON
// handlers formats them into a buffer of the room's own, about 250 bytes
// for every active room, and most rooms never log a line.
func roomLogger(base *slog.Logger, key persistence.RoomKey) *slog.Logger {
	return slog.New(&roomHandler{next: base.Handler(), key: key})
}

type roomHandler struct {
	next slog.Handler
	key  persistence.RoomKey
}

func (h *roomHandler) attrs() [2]slog.Attr {
	return [2]slog.Attr{slog.String("app_code", h.key.AppCode), slog.String("room_id", h.key.RoomID)}
}

func (h *roomHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle writes r with the room's fields first, where With puts them.
func (h *roomHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	a := h.attrs()
	out.AddAttrs(a[:]...)
	r.Attrs(func(at slog.Attr) bool {
		out.AddAttrs(at)
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs and WithGroup (a logger derived for a worker or an event) give
// up the deferral: the derived logger is built for lines about to be
// written.
func (h *roomHandler) WithAttrs(as []slog.Attr) slog.Handler {
	a := h.attrs()
	return h.next.WithAttrs(append(a[:], as...))
}

func (h *roomHandler) WithGroup(name string) slog.Handler {
	a := h.attrs()
	return h.next.WithAttrs(a[:]).WithGroup(name)
}
