package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// IMBridgeWorkerName is the IM bridge's `worker` log field.
const IMBridgeWorkerName = "room_im_bridge"

// IMBridgeStore is what the IM bridge reads and marks of room_outbox.
type IMBridgeStore interface {
	GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error)
	MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error
}

// IMBridgeDeps is what BridgeIM uses.
type IMBridgeDeps struct {
	Store IMBridgeStore
	// StoreOf, when set, is the store of a room's database (several room
	// databases); Store is then unused.
	StoreOf        func(persistence.RoomKey) IMBridgeStore
	Publisher      delivery.Publisher
	PublishTimeout time.Duration
	NodeID         string
	Logger         *slog.Logger
}

// BridgeIM is seed 003's room IM bridge, the optional second IM path: one
// room_outbox event taken from the topic (its own consumer group,
// hyapp-room-im-bridge by default, consumed in order per room) goes to the
// room's IM group unless the row says the room's IM channel already sent
// it (status published, by the room's publisher or the relay) or set it
// aside (parked, skipped). Then the row is marked published, best effort,
// as the rooms' own sync path does. So an event the room's IM channel
// already delivered is never sent again; a row still pending when both
// the relay and the bridge take it can reach its group twice, as the
// rooms' sync path and the relay can today, and clients drop the second
// by event_id. A message that does not decode wraps ErrCorruptEnvelope;
// a store or IM error is returned for the consumer to redeliver.
func BridgeIM(ctx context.Context, d IMBridgeDeps, data []byte) error {
	var env persistence.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptEnvelope, err)
	}
	if err := checkEnvelope(env); err != nil {
		return err
	}
	if !room.IsIMEvent(env.EventType) {
		return nil
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	store := d.Store
	if d.StoreOf != nil {
		store = d.StoreOf(env.Key())
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	row, err := store.GetOutbox(sctx, env.EventID)
	cancel()
	switch {
	case err == nil && row.Status != persistence.OutboxPending:
		return nil
	case err != nil && !errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("relay: im bridge: read %s: %w", env.EventID, err)
	}
	timeout := d.PublishTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = d.Publisher.PublishRoomEvent(pctx, env)
	cancel()
	if err != nil {
		supervise.EventLogger(log, IMBridgeWorkerName, env).Warn("im bridge publish failed: the message comes again",
			slog.String("error", supervise.ErrorText(err)))
		return err
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := store.MarkOutboxPublished(mctx, env.EventID, time.Now().UnixMilli()); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		supervise.EventLogger(log, IMBridgeWorkerName, env).Warn("im bridge mark failed: the relay may send it again (same event_id)",
			slog.String("error", supervise.ErrorText(err)))
	}
	return nil
}
