package giftsettle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/promset"
	"github.com/hyapp/roomcell/persistence"
)

// WorkerName names the worker in logs and metrics.
const WorkerName = "gift_reconciler"

// Wallet is what the reconciler needs of the wallet (*wallet.Service).
type Wallet interface {
	OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error)
	GiftHoldStats(ctx context.Context) (persistence.HoldStats, error)
	ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	ParkGift(ctx context.Context, appCode, commandID, reason string) (bool, error)
}

// Rooms is the room store's void fence.
type Rooms interface {
	VoidGift(ctx context.Context, key persistence.RoomKey, commandID string, nowMs int64) (bool, error)
}

// Deps configures a reconciler. Wallet, Rooms, a complete Config (as
// Load gives it, or configs.WithDefaults) and Timeout are required.
type Deps struct {
	Wallet Wallet
	Rooms  Rooms
	// Config is wallet.gift_reconciler. SettleAfter is the age at which an
	// open reservation is settled here: the void fence keeps any age
	// correct; a short one only refunds gifts a slow room write would
	// still have delivered. A reservation whose settlement failed
	// ParkAfter times is parked; MaxBackoff caps the wait between its
	// tries.
	Config configs.GiftReconcilerConfig
	// Timeout bounds each store call (room.store_timeout).
	Timeout time.Duration
	Clock   func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics // nil records nothing
	// Stuck remembers the failures across passes and actor restarts
	// (Start makes one); the park itself is kept in the wallet store.
	Stuck *Stuck
}

// checked refuses missing dependencies and a Config that is not complete
// (the error names its key); it applies no configuration default, only the
// fallbacks that are not configuration.
func (d Deps) checked() (Deps, error) {
	if d.Wallet == nil || d.Rooms == nil {
		return d, errors.New("giftsettle: wallet and room store are required")
	}
	if err := d.Config.Validate(); err != nil {
		return d, err
	}
	if d.Timeout <= 0 {
		return d, fmt.Errorf("giftsettle: timeout %s must be positive (room.store_timeout)", d.Timeout)
	}
	supervise.Fallbacks(&d.Logger, &d.Clock)
	if d.Stuck == nil {
		d.Stuck = NewStuck()
	}
	return d, nil
}

// Result counts one pass: settled, failed (backing off), newly parked,
// and skipped (parked or backing off).
type Result struct {
	Confirmed, Refunded, Failed, Parked, Skipped int
}

// RunOnce settles up to BatchSize open reservations older than SettleAfter and
// refreshes the gauges. A reservation that fails stays open, backs off
// and, after ParkAfter failures, is parked in the wallet store (Stuck);
// the store's scan no longer returns it, and this one reads past the ones
// it skips. The error of the first failure is returned with the counts.
func RunOnce(ctx context.Context, d Deps) (Result, error) {
	d, err := d.checked()
	if err != nil {
		return Result{}, err
	}
	var res Result
	now := d.Clock()
	remembered, _ := d.Stuck.size()
	limit := d.Config.BatchSize + remembered
	lctx, cancel := context.WithTimeout(ctx, d.Timeout)
	holds, err := d.Wallet.OpenGiftHolds(lctx, now.Add(-d.Config.SettleAfter).UnixMilli(), limit)
	cancel()
	if err != nil {
		return res, fmt.Errorf("list open gift holds: %w", err)
	}
	var first error
	try, repark := d.Stuck.order(holds, d.Clock(), d.Config.BatchSize, &res.Skipped)
	for _, h := range repark {
		if ctx.Err() != nil {
			break
		}
		if err := park(ctx, d, h, d.Stuck.lastFailure(holdID{h.AppCode, h.CommandID}), nil); err != nil && first == nil {
			first = err
		}
	}
	for _, h := range try {
		if ctx.Err() != nil {
			break
		}
		id := holdID{h.AppCode, h.CommandID}
		outcome, err := settleOne(ctx, d, h)
		attrs := []any{"worker", WorkerName, "app_code", h.AppCode, "room_id", h.RoomID, "command_id", h.CommandID,
			"age_ms", now.UnixMilli() - h.CreatedAtMs}
		if err != nil {
			res.Failed++
			if first == nil {
				first = fmt.Errorf("gift %s/%s: %w", h.AppCode, h.CommandID, err)
			}
			fails, parked := d.Stuck.failed(id, d.Clock(), d.Config.PollInterval, d.Config.MaxBackoff, d.Config.ParkAfter, err.Error())
			attrs = append(attrs, "outcome", outcome, "failures", fails, "error", err)
			if parked {
				res.Parked++
				_ = park(ctx, d, h, err.Error(), attrs)
			} else {
				d.Logger.Warn("gift reservation not settled; backing off", attrs...)
			}
			continue
		}
		d.Stuck.settled(id)
		if outcome == persistence.HoldConfirmed {
			res.Confirmed++
		} else {
			res.Refunded++
		}
		d.Logger.Info("gift reservation settled by the reconciler", append(attrs, "outcome", outcome)...)
	}
	// A scan short of its limit saw every old open reservation: the
	// remembered ones it did not see were settled elsewhere.
	if len(holds) < limit && ctx.Err() == nil {
		open := make(map[holdID]bool, len(holds))
		for _, h := range holds {
			open[holdID{h.AppCode, h.CommandID}] = true
		}
		d.Stuck.keepOnly(open)
	}
	d.Metrics.add(res)
	sctx, cancel := context.WithTimeout(ctx, d.Timeout)
	st, err := d.Wallet.GiftHoldStats(sctx)
	cancel()
	if err == nil {
		// The store's count is every node's parks; a park the store has
		// not recorded yet is this node's alone.
		_, pending := d.Stuck.size()
		d.Metrics.set(st, d.Clock())
		d.Metrics.setParked(int(st.Parked) + pending)
	} else if first == nil {
		first = fmt.Errorf("gift hold stats: %w", err)
	}
	return res, first
}

// park records h as parked in the wallet store, so no reconciler tries it
// again, after a restart or on another node, until an operator resolves
// it. Once recorded (or found settled or parked already) Stuck forgets
// it; if the store cannot be reached it stays parked in Stuck and the
// next pass retries. attrs, when set, are the failure's log attributes:
// the ERROR line is written once, by the call that parked it.
func park(ctx context.Context, d Deps, h persistence.GiftHold, reason string, attrs []any) error {
	id := holdID{h.AppCode, h.CommandID}
	pctx, cancel := context.WithTimeout(ctx, d.Timeout)
	parked, err := d.Wallet.ParkGift(pctx, h.AppCode, h.CommandID, reason)
	cancel()
	if attrs == nil {
		attrs = []any{"worker", WorkerName, "app_code", h.AppCode, "room_id", h.RoomID, "command_id", h.CommandID}
	}
	switch {
	case err != nil && !errors.Is(err, wallet.ErrGiftNotReserved):
		d.Logger.Warn("gift reservation to park could not be marked parked in the wallet store; it stays parked on this node "+
			"and the next pass retries", append(attrs, "park_error", err)...)
		return fmt.Errorf("park gift %s/%s: %w", h.AppCode, h.CommandID, err)
	case parked:
		d.Stuck.settled(id)
		d.Logger.Error("gift reservation parked: its settlement keeps failing, the sender's COIN stays frozen until an operator "+
			"resolves it from any node (roomctl wallet hold list --parked; roomctl wallet hold confirm|refund)", attrs...)
	default:
		// Settled or parked meanwhile (an operator, another node).
		d.Stuck.settled(id)
	}
	return nil
}

// settleOne voids the gift in its room first: after that no append of it
// can commit, so "not sent" is final and the refund is safe.
func settleOne(ctx context.Context, d Deps, h persistence.GiftHold) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, d.Timeout)
	sent, err := d.Rooms.VoidGift(vctx, persistence.RoomKey{AppCode: h.AppCode, RoomID: h.RoomID}, h.CommandID, d.Clock().UnixMilli())
	cancel()
	if err != nil {
		return "", fmt.Errorf("void in room %s: %w", h.RoomID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	if sent {
		_, err = d.Wallet.ConfirmGift(wctx, h.AppCode, h.CommandID)
		return persistence.HoldConfirmed, err
	}
	_, err = d.Wallet.RefundGift(wctx, h.AppCode, h.CommandID)
	return persistence.HoldRefunded, err
}

// Metrics are the reconciler's instruments.
type Metrics struct {
	Open      prometheus.Gauge
	OldestAge prometheus.Gauge
	Refunds   prometheus.Counter
	Confirms  prometheus.Counter
	Failures  prometheus.Counter
	Parked    prometheus.Gauge
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	s := promset.New(reg, "giftsettle")
	m := &Metrics{
		Open: s.Gauge("roomcell_wallet_gift_holds_open", "Gift reservations neither confirmed nor refunded, as of the reconciler's last pass."),
		OldestAge: s.Gauge("roomcell_wallet_gift_hold_oldest_age_seconds",
			"Age in seconds of the oldest open gift reservation (0 when none), as of the reconciler's last pass."),
		Refunds: s.Counter("roomcell_wallet_gift_reconciler_refunds_total",
			"Gift reservations the reconciler refunded (their room never logged the gift)."),
		Confirms: s.Counter("roomcell_wallet_gift_reconciler_confirms_total",
			"Gift reservations the reconciler confirmed (the room logged the gift, the confirm had not happened)."),
		Failures: s.Counter("roomcell_wallet_gift_reconciler_failures_total",
			"Reservations the reconciler could not settle in a pass (retried after a backoff, parked after gift_reconciler.park_after failures)."),
		Parked: s.Gauge("roomcell_wallet_gift_holds_parked",
			"Open gift reservations parked after repeated failed settlements, by any node (from the wallet store, plus parks this node could not record yet): an operator resolves each (roomctl wallet hold confirm|refund)."),
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) add(r Result) {
	if m == nil {
		return
	}
	m.Refunds.Add(float64(r.Refunded))
	m.Confirms.Add(float64(r.Confirmed))
	m.Failures.Add(float64(r.Failed))
}

func (m *Metrics) set(st persistence.HoldStats, now time.Time) {
	if m == nil {
		return
	}
	m.Open.Set(float64(st.Open))
	age := int64(0)
	if st.Open > 0 {
		age = max(0, now.UnixMilli()-st.OldestCreatedAtMs)
	}
	m.OldestAge.Set(float64(age) / 1000)
}

func (m *Metrics) setParked(n int) {
	if m == nil {
		return
	}
	m.Parked.Set(float64(n))
}
