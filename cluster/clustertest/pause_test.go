//go:build !race

package clustertest

import (
	"os"
	"testing"
	"time"
)

// chaosPause is how long TestMultiMemberProcessPauseUnderLoad freezes a
// node: 15 s by default (the split-brain run), longer for the
// long form (make chaos runs 15 s and 30 s).
func chaosPause(t *testing.T) time.Duration {
	if v := os.Getenv("ROOMCELL_CHAOS_PAUSE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ROOMCELL_CHAOS_PAUSE=%q: %v", v, err)
		}
		return d
	}
	return 15 * time.Second
}
