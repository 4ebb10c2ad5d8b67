package supervise

import (
	"log/slog"

	"github.com/hyapp/roomcell/persistence"
)

// EventLogger returns log with seed 000's per-event log fields (worker,
// event_id, event_type, room_id); node_id is log's own (the node's
// process logger carries it on every line). Every publish outcome line
// adds the other three: retry_count, status and error (ErrorText, never
// the raw error). The sync publish path and the relay both log through
// it, so their lines carry the same eight fields.
func EventLogger(log *slog.Logger, worker string, env persistence.Envelope) *slog.Logger {
	return log.With(
		slog.String("worker", worker),
		slog.String("event_id", env.EventID),
		slog.String("event_type", env.EventType),
		slog.String("room_id", env.RoomID),
	)
}
