package configs

import (
	"reflect"
	"strings"
	"testing"
)

// The defaults are what config.yaml documents, and the shipped file says
// the same values: limits off unless a file turns them on.
func TestRateLimitDefaults(t *testing.T) {
	empty, err := Parse([]byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if empty.RateLimits.Enabled || !reflect.DeepEqual(empty.RateLimits, DefaultRateLimits()) {
		t.Fatalf("rate_limits defaults %+v, want %+v (off)", empty.RateLimits, DefaultRateLimits())
	}
	if empty.Room.MaxMembers != DefaultMaxMembers {
		t.Fatalf("room.max_members default %d", empty.Room.MaxMembers)
	}
	shippedEnv(t)
	shipped, err := Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shipped.RateLimits, empty.RateLimits) || shipped.Room.MaxMembers != DefaultMaxMembers {
		t.Fatalf("config.yaml documents %+v / %d, the defaults are %+v / %d", shipped.RateLimits, shipped.Room.MaxMembers, empty.RateLimits, DefaultMaxMembers)
	}
	part, err := Parse([]byte("rate_limits: {enabled: true, gift: {user_per_second: 1}}"))
	if err != nil {
		t.Fatal(err)
	}
	if g := part.RateLimits.Gift; !part.RateLimits.Enabled || g.UserPerSecond != 1 || g.UserBurst != 30 || g.AppPerSecond != 5000 {
		t.Fatalf("a partial class keeps the other defaults: %+v", g)
	}
}

func TestRateLimitBadValuesNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"rate_limits: {gift: {user_per_second: 100, app_per_second: 50}}", "rate_limits.gift.app_per_second"},
		{"rate_limits: {nodes: 5000}", "rate_limits.nodes"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
}
