package supervise

import (
	"log/slog"
	"time"
)

// Fallbacks points a nil logger at slog.Default() and a nil clock at
// time.Now: the two dependencies any worker may be given unset. They are
// not configuration; a worker's configuration is taken as given.
func Fallbacks(logger **slog.Logger, clock *func() time.Time) {
	if *logger == nil {
		*logger = slog.Default()
	}
	if *clock == nil {
		*clock = time.Now
	}
}
