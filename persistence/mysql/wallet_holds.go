package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/persistence"
)

// A hold's identity and amounts never change after the reserve; a settle
// rewrites only its state.
const (
	giftHoldColumns = "app_code, command_id, transaction_id, room_id, from_user_id, to_user_id, gift_id, gift_count, price_total, diamond_total, heat_value, state, settle_transaction_id, created_at_ms, updated_at_ms"
	upsertGiftHold  = "INSERT INTO wallet_gift_holds (" + giftHoldColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" +
		" ON DUPLICATE KEY UPDATE state = VALUES(state), settle_transaction_id = VALUES(settle_transaction_id), updated_at_ms = VALUES(updated_at_ms)"
)

func scanGiftHold(r rowScanner) (persistence.GiftHold, error) {
	var h persistence.GiftHold
	err := r.Scan(&h.AppCode, &h.CommandID, &h.TransactionID, &h.RoomID, &h.FromUserID, &h.ToUserID, &h.GiftID,
		&h.Count, &h.PriceTotal, &h.DiamondTotal, &h.HeatValue, &h.State, &h.SettleTransactionID, &h.CreatedAtMs, &h.UpdatedAtMs)
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
		"SELECT "+giftHoldColumns+" FROM wallet_gift_holds WHERE app_code = ? AND command_id = ?", appCode, commandID))
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
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+giftHoldColumns+" FROM wallet_gift_holds WHERE state = 'open' AND created_at_ms < ? ORDER BY created_at_ms LIMIT ?",
		beforeMs, limit)
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
		"SELECT COUNT(*), MIN(created_at_ms) FROM wallet_gift_holds WHERE state = 'open'").Scan(&st.Open, &oldest); err != nil {
		return persistence.HoldStats{}, s.wrap("wallet gift hold stats", err)
	}
	st.OldestCreatedAtMs = oldest.Int64
	return st, nil
}
