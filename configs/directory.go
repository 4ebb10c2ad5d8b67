package configs

import "time"

// DirectoryConfig is the directory block: the room directory (the
// listing, user → room, presence), on Redis (redis.enabled) or embedded.
type DirectoryConfig struct {
	// Timeout bounds one directory call of a room's directory worker.
	Timeout time.Duration `yaml:"timeout"`
	// MaxBacklog: directory work items a room may have queued before new
	// ones are dropped for the next refresh to redo.
	MaxBacklog int64 `yaml:"max_backlog"`
	// ListingGap is the least time between two listing writes of a room:
	// the first change after a quiet spell is written at once, the ones
	// within the gap merge into one write at its end.
	ListingGap time.Duration `yaml:"listing_gap"`
	// PresenceTTL: how long a user's presence entry lasts after its
	// newest write (default presence.stale_after).
	PresenceTTL time.Duration `yaml:"presence_ttl"`
	// RoomTTL: how long a listed room stays listed after its newest
	// update (default 3 × presence.refresh_interval: a live room
	// re-registers every refresh_interval).
	RoomTTL time.Duration `yaml:"room_ttl"`
}

// setDefaults fills the block; its TTLs follow the presence block's
// (set first).
func (c *DirectoryConfig) setDefaults(p PresenceConfig) {
	c.Timeout = durationOr(c.Timeout, 2*time.Second)
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = 1000
	}
	c.ListingGap = durationOr(c.ListingGap, 250*time.Millisecond)
	c.PresenceTTL = durationOr(c.PresenceTTL, p.StaleAfter)
	c.RoomTTL = durationOr(c.RoomTTL, 3*p.RefreshInterval)
}

// validate refuses TTLs that would drop what is still live: a room
// listed for no longer than it takes to re-register falls out of the
// listing between refreshes, and a presence entry that ends before
// presence.stale_after shows a member as gone while the room keeps them.
func (c DirectoryConfig) validate(p PresenceConfig) error {
	if err := firstError(
		mustBePositive("directory.timeout", c.Timeout),
		mustBePositive("directory.max_backlog", c.MaxBacklog),
		mustBePositive("directory.listing_gap", c.ListingGap),
	); err != nil {
		return err
	}
	if c.RoomTTL <= p.RefreshInterval {
		return errorf("directory.room_ttl", "%s is not above presence.refresh_interval (%s): live rooms would drop out of the listing between refreshes", c.RoomTTL, p.RefreshInterval)
	}
	if c.PresenceTTL < p.StaleAfter {
		return errorf("directory.presence_ttl", "%s is under presence.stale_after (%s): members would show as gone while still in their room", c.PresenceTTL, p.StaleAfter)
	}
	return nil
}
