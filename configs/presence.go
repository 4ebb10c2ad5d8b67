package configs

import (
	"fmt"
	"time"
)

// PresenceConfig drives the presence stale worker (actors/presence) and the
// rooms' directory refresh.
type PresenceConfig struct {
	Enabled *bool `yaml:"enabled"` // default true
	// ScanInterval: how often the stale worker scans the rooms this node
	// hosts (default 5s).
	ScanInterval time.Duration `yaml:"scan_interval"`
	// StaleAfter: a member whose newest heartbeat is this old is taken out
	// of the room with LeaveRoom reason heartbeat_timeout (default 60s); a
	// user goes within stale_after + scan_interval of their last heartbeat.
	StaleAfter time.Duration `yaml:"stale_after"`
	// BatchSize caps the leaves one scan sends (default 500); the rest
	// wait for the next scan.
	BatchSize int `yaml:"batch_size"`
	// RefreshInterval: how often a live room re-registers in the directory
	// from its state (default 30s); it is also how long a directory outage
	// stays visible after the directory is back.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// Source: who tells the room that a member is gone (default
	// heartbeat). heartbeat: the stale worker takes out a member whose
	// client sent no Heartbeat for stale_after. im: Tencent IM's
	// State.StateChange callbacks (tencent_im.callback): a member
	// logged out or disconnected for stale_after leaves, a Login before
	// that keeps them; no heartbeats needed. trtc: TRTC's room callbacks
	// (trtc.callback): a member who exited the audio room (104) and did
	// not enter again (103) within stale_after leaves. With im or trtc
	// the heartbeat stale worker does not run: the room decides by its
	// own deadline (room/audio.go).
	Source string `yaml:"source"`
	// AppCodes: with source im, the apps whose rooms an IM login or
	// logout concerns. IM reports a user account (a user id, shared by
	// every app on the IM app), not a room; the user's room in each of
	// these apps is looked up in the room directory.
	AppCodes []string `yaml:"app_codes"`
}

// Presence sources (presence.source).
const (
	PresenceHeartbeat = "heartbeat"
	PresenceIM        = "im"
	PresenceTRTC      = "trtc"
)

// MaxCallbackStaleAfter bounds presence.stale_after when callbacks decide
// (the room keeps each offline member's deadline in its state).
const MaxCallbackStaleAfter = 30 * 24 * time.Hour

// On reports whether the heartbeat stale worker runs: enabled (default
// true) and heartbeats are the source.
func (c PresenceConfig) On() bool {
	return (c.Enabled == nil || *c.Enabled) && (c.Source == "" || c.Source == PresenceHeartbeat)
}

func (c *PresenceConfig) setDefaults() {
	c.ScanInterval = durationOr(c.ScanInterval, 5*time.Second)
	c.StaleAfter = durationOr(c.StaleAfter, 60*time.Second)
	c.BatchSize = intOr(c.BatchSize, 500)
	c.RefreshInterval = durationOr(c.RefreshInterval, 30*time.Second)
	if c.Source == "" {
		c.Source = PresenceHeartbeat
	}
}

// Validate checks the section as it is, applying no default; the error
// names the offending key. The stale worker runs it on the section it is
// given.
func (c PresenceConfig) Validate() error {
	if err := firstError(
		mustBePositive("presence.scan_interval", c.ScanInterval),
		mustBePositive("presence.stale_after", c.StaleAfter),
		mustBePositive("presence.batch_size", c.BatchSize),
		mustBePositive("presence.refresh_interval", c.RefreshInterval),
	); err != nil {
		return err
	}
	switch c.Source {
	case PresenceHeartbeat:
	case PresenceIM, PresenceTRTC:
		if c.StaleAfter > MaxCallbackStaleAfter {
			return errorf("presence.stale_after", "at most %s with presence.source %s, got %s", MaxCallbackStaleAfter, c.Source, c.StaleAfter)
		}
	default:
		return errorf("presence.source", "must be %s, %s or %s, got %q", PresenceHeartbeat, PresenceIM, PresenceTRTC, c.Source)
	}
	if c.Source == PresenceIM && len(c.AppCodes) == 0 {
		return errorf("presence.app_codes", "required with presence.source im: the apps whose rooms an IM login or logout concerns")
	}
	for i, a := range c.AppCodes {
		if a == "" {
			return errorf(fmt.Sprintf("presence.app_codes[%d]", i), "empty app code")
		}
	}
	if c.StaleAfter < c.ScanInterval {
		return errorf("presence.stale_after", "%s is shorter than presence.scan_interval (%s)", c.StaleAfter, c.ScanInterval)
	}
	return nil
}
