package persistence

import "context"

// OutboxScanMark is a place in a claim's walk of the due pending rows,
// which goes oldest first: by creation time, then event id. The zero
// value is the walk's start.
type OutboxScanMark struct {
	CreatedAtMs int64
	EventID     string
	// Set: the mark is a place in the walk (the zero value is its start).
	Set bool
}

// OutboxClaimResumer is implemented by stores whose claim can start its
// walk where an earlier claim stopped. A relay that sends a claim while
// the one before it is still being marked would otherwise walk that
// claim's rows first (still pending, their rooms held) to find nothing in
// them; on a backlog that is a page of row reads per claim for nothing.
type OutboxClaimResumer interface {
	// ClaimPendingOutboxFrom is ClaimPendingOutbox walking the due rows
	// after from (from the oldest when from is the zero value). It also
	// returns where a later claim may start: every due row before that
	// place was looked at by this claim and its room taken, or found held
	// by another owner or not due. Rooms whose rows all lie before from
	// are not served by the claim even when they have become free since,
	// so a sender starts each round of claims from the oldest row again;
	// a resumed claim keeps every rule of ClaimPendingOutbox (one owner
	// per room, a room's lowest pending rows in order).
	ClaimPendingOutboxFrom(ctx context.Context, owner string, nowMs, leaseMs int64, limit int, from OutboxScanMark) ([]OutboxRow, OutboxScanMark, error)
}
