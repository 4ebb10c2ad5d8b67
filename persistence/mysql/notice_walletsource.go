package mysql

import (
	"context"

	"github.com/hyapp/roomcell/persistence"
)

// WalletOutboxReader is the notice workers' read-only view of
// `<wallet_database>`.wallet_outbox through the notice store's pool
// (actors/notice/walletnotice.Source). It never writes: wallet_outbox.status
// belongs to the wallet.
type WalletOutboxReader struct{ s *NoticeStore }

// WalletOutbox returns the reader of the configured wallet database.
func (s *NoticeStore) WalletOutbox() *WalletOutboxReader { return &WalletOutboxReader{s} }

// ListOutboxAfter returns up to limit wallet_outbox rows with id > afterID
// in id order (uk_wallet_outbox_id), with persistence.WalletStore.ListOutboxAfter's
// caveat: an id becomes visible at its transaction's commit, so a smaller
// id can appear after a larger one was read.
func (r *WalletOutboxReader) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
	s := r.s
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT id, event_id, app_code, user_id, event_type, payload, status, created_at_ms, updated_at_ms"+
		" FROM `"+s.walletDB+"`.wallet_outbox WHERE id > ? ORDER BY id LIMIT ?", afterID, limit)
	if err != nil {
		return nil, s.wrap("read wallet outbox", err)
	}
	defer rows.Close()
	var out []persistence.WalletOutboxRecord
	for rows.Next() {
		var rec persistence.WalletOutboxRecord
		var payload []byte
		if err := rows.Scan(&rec.ID, &rec.EventID, &rec.AppCode, &rec.UserID, &rec.EventType, &payload, &rec.Status,
			&rec.CreatedAtMs, &rec.UpdatedAtMs); err != nil {
			return nil, s.wrap("read wallet outbox", err)
		}
		rec.Payload = payload
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read wallet outbox", err)
	}
	return out, nil
}
