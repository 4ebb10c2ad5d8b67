package configs

import "time"

// WatchConfig is the watch block: WatchRoom streams on one node
// (docs/client-protocol.md).
type WatchConfig struct {
	// MaxStreams caps the WatchRoom streams open at once on the node;
	// past it a new one is refused with RESOURCE_EXHAUSTED (reason
	// ROOM_WATCH_LIMIT) and the client tries another node.
	MaxStreams int `yaml:"max_streams"`
	// Buffer is how many commits a stream may have waiting for its
	// reader; a reader more than a buffer behind while its client does
	// not read (a send waiting 2s), or 16 buffers behind while sending,
	// is cut with its resume seq; one behind for the node's own reasons
	// is not.
	// The commits are the node's feed's, shared by the room's streams: a
	// stream holds only its place in them.
	Buffer int `yaml:"buffer"`
	// CheckInterval is how often a node's feed of a room asks the room's
	// owner for its activation and head: a silent owner (frozen, cut off)
	// ends the feed's streams within about this long.
	CheckInterval time.Duration `yaml:"check_interval"`
}

func (c *WatchConfig) setDefaults() {
	c.MaxStreams = intOr(c.MaxStreams, 10000)
	c.Buffer = intOr(c.Buffer, 1024)
	c.CheckInterval = durationOr(c.CheckInterval, 2*time.Second)
}

func (c WatchConfig) validate() error {
	if c.Buffer > 1<<16 {
		return errorf("watch.buffer", "%d is over 65536 commits a stream", c.Buffer)
	}
	if c.CheckInterval < 100*time.Millisecond {
		return errorf("watch.check_interval", "%s is under 100ms", c.CheckInterval)
	}
	return nil
}
