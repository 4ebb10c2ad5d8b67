package configs

// RateLimitConfig is the rate_limits block: how fast one user, and one
// app as a whole, may send each class of room command
// (internal/ratelimit). The rates are for the whole cluster; each node
// enforces its share, rate / nodes (burst / nodes, at least 1), with no
// coordination between nodes. So a client whose calls spread evenly over
// the nodes gets the configured rate, and one that sticks to one node
// gets 1/nodes of it: the limit a client meets is between rate/nodes and
// rate, never above. Set nodes to the number of nodes serving clients.
type RateLimitConfig struct {
	// Enabled turns the limits on. Default false: a node without the
	// block limits nothing (the dev node, tests, benchmarks).
	Enabled bool `yaml:"enabled"`
	// Nodes is the number of nodes the cluster-wide rates are shared by.
	Nodes int `yaml:"nodes"`
	// The command classes: create (CreateRoom, ReopenRoom), join
	// (JoinRoom, LeaveRoom), gift (SendGift), moderation (kicks, bans,
	// mutes, admins, owner transfer, close), command (every other room
	// command) and read (GetRoom, ListBans, ListSeatRequests,
	// ListRooms): its user_* rates are per caller (the x-user-id header,
	// else the bearer token, else the client address; README "Rate
	// limits").
	Create     RateClassConfig `yaml:"create"`
	Join       RateClassConfig `yaml:"join"`
	Gift       RateClassConfig `yaml:"gift"`
	Moderation RateClassConfig `yaml:"moderation"`
	Command    RateClassConfig `yaml:"command"`
	Read       RateClassConfig `yaml:"read"`
}

// RateClassConfig is one class's limits: a token bucket per user (within
// an app) and one per app, each with a sustained rate and a burst.
type RateClassConfig struct {
	UserPerSecond float64 `yaml:"user_per_second"`
	UserBurst     int     `yaml:"user_burst"`
	AppPerSecond  float64 `yaml:"app_per_second"`
	AppBurst      int     `yaml:"app_burst"`
}

// DefaultRateLimits are the documented defaults (configs/config.yaml).
func DefaultRateLimits() RateLimitConfig {
	return RateLimitConfig{
		Nodes:      1,
		Create:     RateClassConfig{UserPerSecond: 0.2, UserBurst: 5, AppPerSecond: 100, AppBurst: 200},
		Join:       RateClassConfig{UserPerSecond: 2, UserBurst: 10, AppPerSecond: 5000, AppBurst: 10000},
		Gift:       RateClassConfig{UserPerSecond: 10, UserBurst: 30, AppPerSecond: 5000, AppBurst: 10000},
		Moderation: RateClassConfig{UserPerSecond: 2, UserBurst: 20, AppPerSecond: 500, AppBurst: 1000},
		Command:    RateClassConfig{UserPerSecond: 10, UserBurst: 30, AppPerSecond: 20000, AppBurst: 40000},
		Read:       RateClassConfig{UserPerSecond: 20, UserBurst: 40, AppPerSecond: 20000, AppBurst: 40000},
	}
}

func (c *RateLimitConfig) setDefaults() {
	d := DefaultRateLimits()
	c.Nodes = intOr(c.Nodes, d.Nodes)
	c.Create.setDefaults(d.Create)
	c.Join.setDefaults(d.Join)
	c.Gift.setDefaults(d.Gift)
	c.Moderation.setDefaults(d.Moderation)
	c.Command.setDefaults(d.Command)
	c.Read.setDefaults(d.Read)
}

func (c *RateClassConfig) setDefaults(d RateClassConfig) {
	if c.UserPerSecond <= 0 {
		c.UserPerSecond = d.UserPerSecond
	}
	if c.AppPerSecond <= 0 {
		c.AppPerSecond = d.AppPerSecond
	}
	c.UserBurst = intOr(c.UserBurst, d.UserBurst)
	c.AppBurst = intOr(c.AppBurst, d.AppBurst)
}

// Classes returns the classes by name.
func (c RateLimitConfig) Classes() map[string]RateClassConfig {
	return map[string]RateClassConfig{"create": c.Create, "join": c.Join, "gift": c.Gift, "moderation": c.Moderation, "command": c.Command, "read": c.Read}
}

func (c RateLimitConfig) validate() error {
	if c.Nodes > 1000 {
		return errorf("rate_limits.nodes", "%d is over 1000", c.Nodes)
	}
	for name, k := range c.Classes() {
		if k.AppPerSecond < k.UserPerSecond {
			return errorf("rate_limits."+name+".app_per_second", "%g is under user_per_second %g: one user could use the whole app", k.AppPerSecond, k.UserPerSecond)
		}
	}
	return nil
}
