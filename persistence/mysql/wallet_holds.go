package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/persistence"
)

// A hold's identity and amounts never change after the reserve; a settle
// rewrites only its state, a park only the park columns (parked_at_ms,
// park_reason), which the reserve leaves at their defaults.
const (
	giftHoldRead    = giftHoldColumns + ", parked_at_ms, park_reason"
	giftHoldColumns = "app_code, command_id, transaction_id, room_id, from_user_id, to_user_id, gift_id, gift_count, price_total, diamond_total, heat_value, state, settle_transaction_id, created_at_ms, updated_at_ms"
	upsertGiftHold  = "INSERT INTO wallet_gift_holds (" + giftHoldColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" +
		" ON DUPLICATE KEY UPDATE state = VALUES(state), settle_transaction_id = VALUES(settle_transaction_id), updated_at_ms = VALUES(updated_at_ms)"
)

func scanGiftHold(r rowScanner) (persistence.GiftHold, error) {
	var h persistence.GiftHold
	err := r.Scan(&h.AppCode, &h.CommandID, &h.TransactionID, &h.RoomID, &h.FromUserID, &h.ToUserID, &h.GiftID,
		&h.Count, &h.PriceTotal, &h.DiamondTotal, &h.HeatValue, &h.State, &h.SettleTransactionID, &h.CreatedAtMs, &h.UpdatedAtMs, &h.ParkedAtMs, &h.ParkReason)
	return h, err
}

// GiftHold implements wallet.Store.
func (s *WalletStore) GiftHold(ctx context.Context, appCode, commandID string) (persistence.GiftHold, error) {
	if s.closed.Load() {
		return persistence.GiftHold{}, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	h, err := scanGiftHold(s.db.QueryRowContext(ctx,
		"SELECT "+giftHoldRead+" FROM wallet_gift_holds WHERE app_code = ? AND command_id = ?", appCode, commandID))
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.GiftHold{}, fmt.Errorf("mysql: gift hold %q: %w", commandID, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.GiftHold{}, s.wrap("wallet read gift hold", err)
	}
	return h, nil
}

// OpenGiftHolds implements wallet.Store.
func (s *WalletStore) OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error) {
	if s.closed.Load() {
		return nil, errWalletClosed
	}
	return s.listHolds(ctx, "SELECT "+giftHoldRead+" FROM wallet_gift_holds"+
		" WHERE state = 'open' AND parked_at_ms = 0 AND created_at_ms < ? ORDER BY created_at_ms LIMIT ?", beforeMs, limit)
}

// ParkedGiftHolds implements persistence.GiftHoldStore.
func (s *WalletStore) ParkedGiftHolds(ctx context.Context, limit int) ([]persistence.GiftHold, error) {
	if s.closed.Load() {
		return nil, errWalletClosed
	}
	return s.listHolds(ctx, "SELECT "+giftHoldRead+" FROM wallet_gift_holds"+
		" WHERE state = 'open' AND parked_at_ms > 0 ORDER BY parked_at_ms, created_at_ms LIMIT ?", limit)
}

func (s *WalletStore) listHolds(ctx context.Context, query string, args ...any) ([]persistence.GiftHold, error) {
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("wallet scan gift holds", err)
	}
	defer rows.Close()
	var out []persistence.GiftHold
	for rows.Next() {
		h, err := scanGiftHold(rows)
		if err != nil {
			return nil, s.wrap("wallet scan gift holds", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("wallet scan gift holds", err)
	}
	return out, nil
}

// GiftHoldStats implements wallet.Store.
func (s *WalletStore) GiftHoldStats(ctx context.Context) (persistence.HoldStats, error) {
	if s.closed.Load() {
		return persistence.HoldStats{}, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	var st persistence.HoldStats
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*), MIN(created_at_ms), COALESCE(SUM(parked_at_ms > 0), 0) FROM wallet_gift_holds WHERE state = 'open'").
		Scan(&st.Open, &oldest, &st.Parked); err != nil {
		return persistence.HoldStats{}, s.wrap("wallet gift hold stats", err)
	}
	st.OldestCreatedAtMs = oldest.Int64
	return st, nil
}

// ParkGiftHold implements persistence.GiftHoldStore: one conditional
// UPDATE, so a settle that committed first wins and a second park changes
// nothing.
func (s *WalletStore) ParkGiftHold(ctx context.Context, appCode, commandID string, nowMs int64, reason string) (bool, error) {
	if s.closed.Load() {
		return false, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, "UPDATE wallet_gift_holds SET parked_at_ms = ?, park_reason = ?"+
		" WHERE app_code = ? AND command_id = ? AND state = 'open' AND parked_at_ms = 0",
		max(nowMs, 1), persistence.CutParkReason(reason), appCode, commandID)
	if err != nil {
		return false, s.wrap("wallet park gift hold", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, s.wrap("wallet park gift hold", err)
	} else if n == 1 {
		return true, nil
	}
	if _, err := s.GiftHold(ctx, appCode, commandID); err != nil {
		return false, err
	}
	return false, nil
}
