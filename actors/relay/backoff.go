package relay

import (
	"hash/fnv"
	"strconv"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// dueAt is when a pending row may be published again.
//
// fixed_interval (the seed's V1): always now; a failed row is simply
// retried by the next poll.
//
// exponential: a row that failed n times (n >= 1) waits
// min(max_backoff, poll_interval·2^n) after its last failure
// (updated_at_ms), scaled by an "equal jitter" factor in [0.5, 1). The
// backoff lives in the relay, not the store, because room_outbox has no
// next_retry_at_ms column (seed 000, Retry Strategy): the store still hands
// out such rows and the relay skips them (see ProcessBatch for how skipped
// rows are kept from blocking newer ones). The jitter is a hash of event_id
// and retry_count instead of a random draw, so every poll and every node
// computes the same due time for a row; a fresh draw per poll would retry
// as soon as any draw came up short.
func dueAt(cfg configs.OutboxWorkerConfig, row persistence.OutboxRow) time.Time {
	if cfg.RetryStrategy != configs.RetryExponential || row.RetryCount <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(row.UpdatedAtMs).Add(backoff(cfg, row.Envelope.EventID, row.RetryCount))
}

// backoff is the exponential strategy's delay after the nth failure.
func backoff(cfg configs.OutboxWorkerConfig, eventID string, n int) time.Duration {
	d := cfg.MaxBackoff
	// Doubling past the cap (or past int64) is pointless: stop early.
	if n < 62 {
		if step := cfg.PollInterval << n; step > 0 && step>>n == cfg.PollInterval && step < d {
			d = step
		}
	}
	return time.Duration(float64(d) * (0.5 + 0.5*jitter(eventID, n)))
}

// jitter is a stable pseudo-random fraction in [0, 1) for one row and
// retry count.
func jitter(eventID string, n int) float64 {
	h := fnv.New64a()
	h.Write([]byte(eventID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(n)))
	return float64(h.Sum64()>>11) / float64(1<<53)
}
