package relay

import (
	"hash/fnv"
	"strconv"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// nextRetry is when a row that failed at now is due again
// (next_retry_at_ms; claims skip it until then, so it holds back only its
// own room).
//
// fixed_interval (the seed's V1): one poll_interval later, forever.
//
// exponential: after its nth failure (n = retry_count+1) a row waits
// min(max_backoff, poll_interval·2^n), scaled by an "equal jitter" factor
// in [0.5, 1). The jitter is a hash of event_id and n instead of a random
// draw, so a row's schedule is reproducible in logs and tests.
func nextRetry(cfg configs.OutboxWorkerConfig, row persistence.OutboxRow, now time.Time) time.Time {
	if cfg.RetryStrategy != configs.RetryExponential {
		return now.Add(cfg.PollInterval)
	}
	return now.Add(backoff(cfg, row.Envelope.EventID, row.RetryCount+1))
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
