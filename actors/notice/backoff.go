package notice

import (
	"math/rand/v2"
	"time"

	"github.com/hyapp/roomcell/configs"
)

// Backoff is the delay after the nth failed attempt (n >= 1):
// min(max_backoff, poll_interval·2^n) scaled by "equal jitter" in
// [0.5, 1), so a burst of failures (an IM outage) does not come back as
// one burst. The result is stored in next_retry_at_ms, so unlike the
// relay's (which has no such column) it may be a fresh random draw.
func Backoff(cfg configs.NoticeWorkerConfig, n int) time.Duration {
	return backoffWith(cfg, n, rand.Float64())
}

func backoffWith(cfg configs.NoticeWorkerConfig, n int, r float64) time.Duration {
	d := cfg.MaxBackoff
	if n < 1 {
		n = 1
	}
	// Doubling past the cap (or past int64) is pointless: stop early.
	if n < 62 {
		if step := cfg.PollInterval << n; step > 0 && step>>n == cfg.PollInterval && step < d {
			d = step
		}
	}
	return time.Duration(float64(d) * (0.5 + 0.5*r))
}
