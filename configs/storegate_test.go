package configs

import (
	"strings"
	"testing"
)

// The store gate's thresholds: defaults when unset; a value under
// MinStoreGateWait, or not under room.store_timeout, stops the start
// naming the key (the gate would close on a store that answers, or the
// calls would time out before it noticed); one from the environment is
// checked the same way.
func TestStoreGateThresholds(t *testing.T) {
	c, err := Parse([]byte(""))
	if err != nil {
		t.Fatal(err)
	}
	if c.Room.StoreStallAfter != DefaultStoreStallAfter || c.Room.StoreProbeTimeout != DefaultStoreProbeTimeout {
		t.Fatalf("defaults: stall after %s, probe timeout %s", c.Room.StoreStallAfter, c.Room.StoreProbeTimeout)
	}
	for key, bad := range map[string][]string{
		"room.store_stall_after":   {"room: {store_stall_after: 5ms}", "room: {store_stall_after: 3s}", "room: {store_timeout: 1s, store_stall_after: 2s}"},
		"room.store_probe_timeout": {"room: {store_probe_timeout: 1ms}", "room: {store_probe_timeout: 3s}", "room: {store_timeout: 300ms, store_stall_after: 100ms, store_probe_timeout: 300ms}"},
	} {
		for _, y := range bad {
			if _, err := Parse([]byte(y + "\n")); err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("%q: %v; want an error naming %s", y, err, key)
			}
		}
	}
	c, err = Parse([]byte("room: {store_stall_after: 400ms, store_probe_timeout: 250ms}\n"))
	if err != nil || c.Room.StoreStallAfter.Milliseconds() != 400 || c.Room.StoreProbeTimeout.Milliseconds() != 250 {
		t.Fatalf("set: %+v, %v", c.Room, err)
	}
	env := func(k string) (string, bool) { return "1ms", k == EnvName("room.store_stall_after") }
	if _, err := Build(Layers{Env: env}); err == nil || !strings.Contains(err.Error(), "room.store_stall_after") {
		t.Errorf("from the environment: %v; want an error naming room.store_stall_after", err)
	}
}
