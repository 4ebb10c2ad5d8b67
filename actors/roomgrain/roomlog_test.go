package roomgrain

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// A room's logger writes what Logger.With("app_code", …, "room_id", …)
// writes, byte for byte, at every use the room's code makes of it: plain
// lines, derived loggers (the event logger), groups and level checks.
func TestRoomLoggerWritesWhatWithWrites(t *testing.T) {
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	uses := []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"plain", func(l *slog.Logger) { l.Warn("room append failed", "seq", 7, "error", "boom") }},
		{"no attrs", func(l *slog.Logger) { l.Error("panicked") }},
		{"derived", func(l *slog.Logger) {
			l.With("worker", "room_outbox", "event_id", "e1").With(slog.String("path", "sync")).Info("publish failed", "retry_count", 0)
		}},
		{"group", func(l *slog.Logger) { l.WithGroup("g").Warn("in a group", "k", "v") }},
		{"below level", func(l *slog.Logger) { l.Debug("dropped", "k", "v") }},
		{"enabled", func(l *slog.Logger) { l.Info("enabled", "info", l.Enabled(context.Background(), slog.LevelInfo)) }},
	}
	for _, u := range uses {
		for _, handler := range []func(*bytes.Buffer) slog.Handler{
			func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		} {
			var want, got bytes.Buffer
			wantBase := slog.New(noTime{handler(&want)}).With("node_id", "n1")
			gotBase := slog.New(noTime{handler(&got)}).With("node_id", "n1")
			u.log(wantBase.With("app_code", key.AppCode, "room_id", key.RoomID))
			u.log(roomLogger(gotBase, key))
			if got.String() != want.String() {
				t.Errorf("%s: room logger wrote\n%s\nwant (Logger.With)\n%s", u.name, got.String(), want.String())
			}
		}
	}
}

// noTime drops the record's time (a zero time is not written) so two
// writes compare equal.
type noTime struct{ slog.Handler }

func (h noTime) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(time.Time{}, r.Level, r.Message, 0)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h noTime) WithAttrs(as []slog.Attr) slog.Handler { return noTime{h.Handler.WithAttrs(as)} }
func (h noTime) WithGroup(n string) slog.Handler       { return noTime{h.Handler.WithGroup(n)} }
