package configs

import (
	"strings"
	"testing"
	"time"
)

// The like streams' bounds: defaults set when unset, a negative cap and
// an idle time outside 1s..1h refused by key (never taken as a default).
func TestLikeStreamLimits(t *testing.T) {
	c := Default()
	if c.GRPC.MaxLikeStreams != 10000 || c.GRPC.LikeStreamIdle != time.Minute {
		t.Fatalf("defaults %d %s", c.GRPC.MaxLikeStreams, c.GRPC.LikeStreamIdle)
	}
	for _, tc := range []struct {
		key  string
		edit func(*Config)
	}{
		{"grpc.max_like_streams", func(c *Config) { c.GRPC.MaxLikeStreams = -1 }},
		{"grpc.like_stream_idle", func(c *Config) { c.GRPC.LikeStreamIdle = -time.Second }},
		{"grpc.like_stream_idle", func(c *Config) { c.GRPC.LikeStreamIdle = 500 * time.Millisecond }},
		{"grpc.like_stream_idle", func(c *Config) { c.GRPC.LikeStreamIdle = 2 * time.Hour }},
	} {
		c := Default()
		tc.edit(&c)
		c.GRPC.setDefaults()
		if err := c.GRPC.validate(); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v", tc.key, err)
		}
	}
	c = Default()
	c.GRPC.MaxLikeStreams, c.GRPC.LikeStreamIdle = 3, 5*time.Second
	c.GRPC.setDefaults()
	if err := c.GRPC.validate(); err != nil || c.GRPC.MaxLikeStreams != 3 || c.GRPC.LikeStreamIdle != 5*time.Second {
		t.Fatalf("3 streams, 5s idle: %v %+v", err, c.GRPC)
	}
}
