package delivery

import (
	"context"
	"log/slog"

	"github.com/hyapp/roomcell/persistence"
)

// LogPublisher "publishes" a room event by logging it as one structured
// line. It never fails; use it where no IM (not even the fake) is wanted.
type LogPublisher struct {
	Logger *slog.Logger
}

// PublishRoomEvent logs env.
func (p LogPublisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	p.Logger.LogAttrs(ctx, slog.LevelInfo, "room event",
		slog.String("event_id", env.EventID), slog.String("event_type", env.EventType),
		slog.String("app_code", env.AppCode), slog.String("room_id", env.RoomID),
		slog.Int64("room_seq", env.RoomSeq), slog.String("command_id", env.CommandID),
		slog.String("payload", string(env.Payload)))
	return nil
}
