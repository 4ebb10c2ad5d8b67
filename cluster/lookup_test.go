package cluster

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A stopped grain is found by the name the placement gave it
// ("<placement>/<identity>$<n>"), whatever '$' its identity holds, and
// only when the PID is the one recorded: a name of another placement, of
// an older activation or of a grain never recorded finds nothing.
func TestPlacementFindsGrainByName(t *testing.T) {
	self := actor.NewPID("node-1:7000", placementName)
	p := &placement{actors: map[string]grainMeta{}, props: map[string]kindProps{"room": {}, "other": {}}}
	record := func(kind, identity, n string) *actor.PID {
		pid := actor.NewPID(self.Address, self.Id+"/"+identity+n)
		p.actors[kind+"/"+identity] = grainMeta{pid: pid}
		return pid
	}
	cases := map[string]*actor.PID{
		"room/app/r":     record("room", "app/r", "$1"),
		"room/app/r$1":   record("room", "app/r$1", "$2"),
		"room/app/$$":    record("room", "app/$$", "$a"),
		"other/app/r$1$": record("other", "app/r$1$", "$b"),
	}
	for want, pid := range cases {
		if got, ok := p.grainOf(self, pid); !ok || got != want {
			t.Errorf("grainOf(%s) = %q, %v; want %q", pid.Id, got, ok, want)
		}
	}
	for _, pid := range []*actor.PID{
		actor.NewPID(self.Address, self.Id+"/app/r$9"),              // an older activation of app/r
		actor.NewPID("node-2:7000", self.Id+"/app/r$1"),             // another node's
		actor.NewPID(self.Address, "elsewhere/app/r$1"),             // not this placement's child
		actor.NewPID(self.Address, self.Id+"/app/never-recorded$3"), // never activated
		actor.NewPID(self.Address, self.Id+"/no-suffix"),
	} {
		if got, ok := p.grainOf(self, pid); ok {
			t.Errorf("grainOf(%s@%s) = %q, want nothing", pid.Id, pid.Address, got)
		}
	}
	// The key gives the identity back, '/' in the identity and all.
	for key := range cases {
		ci := identityOf(key)
		if ci.Kind+"/"+ci.Identity != key || ci.AsKey() != key {
			t.Errorf("identityOf(%q) = %s / %s", key, ci.Kind, ci.Identity)
		}
	}
}
