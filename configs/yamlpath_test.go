package configs

import (
	"strings"
	"testing"
)

// A mistake in the file is named by its dotted key path and line, with
// the nearest known key for a misspelling and the unit a duration needs;
// never by a Go type.
func TestParseErrorsNameThePathAndHint(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"misspelt key", "outbox_worker:\n  poll_intervall: 5s\n",
			[]string{"config: outbox_worker.poll_intervall: unknown key (line 2); did you mean poll_interval?"}},
		{"misspelt section", "outbox_workr:\n  poll_interval: 5s\n",
			[]string{"config: outbox_workr: unknown key (line 1); did you mean outbox_worker?"}},
		{"nothing close", "outbox_worker:\n  zzzzzzzzzz: 1\n",
			[]string{"outbox_worker.zzzzzzzzzz: unknown key (line 2); known keys here:", "poll_interval"}},
		{"duration without unit", "outbox_worker:\n  poll_interval: 5\n",
			[]string{"config: outbox_worker.poll_interval: 5 has no unit: a duration needs one, e.g. 5s or 5ms (line 2)"}},
		{"fractional duration without unit", "cluster:\n  request_timeout: 1.5\n",
			[]string{"cluster.request_timeout: 1.5 has no unit"}},
		{"not a duration", "presence:\n  stale_after: soon\n",
			[]string{`presence.stale_after: "soon" is not a duration: want a number with a unit, e.g. 5s, 500ms or 2m (line 2)`}},
		{"not a number", "outbox_worker:\n  batch_size: many\n",
			[]string{`outbox_worker.batch_size: "many" is not a whole number (line 2)`}},
		{"not a bool", "tencent_im:\n  enabled: perhaps\n",
			[]string{`tencent_im.enabled: "perhaps" is not true or false (line 2)`}},
		{"list entry", "gifts:\n  - id: rose\n    pricee: 1\n",
			[]string{"gifts[0].pricee: unknown key (line 3); did you mean price?"}},
		{"seed 003 shape", "wallet_notice_worker:\n  poll_interval: 3\n",
			[]string{"wallet_notice_worker.poll_interval: 3 has no unit"}},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil {
			t.Errorf("%s: parsed", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		for _, goType := range []string{"configs.", "time.Duration", "!!int", "!!str"} {
			if strings.Contains(err.Error(), goType) {
				t.Errorf("%s: error %q names a Go or YAML type (%s)", tc.name, err, goType)
			}
		}
	}
}

// The checks know every key the decoder knows: the shipped files load.
func TestShippedFilesPassTheKeyCheck(t *testing.T) {
	for _, yaml := range []string{"outbox_worker:\n  poll_interval: 500ms\n  batch_size: 100\n", "", "# nothing\n"} {
		if _, err := Parse([]byte(yaml)); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}

func TestNearestKey(t *testing.T) {
	known := []string{"poll_interval", "lease_ttl", "batch_size", "max_backoff"}
	for key, want := range map[string]string{"poll_intervall": "poll_interval", "leas_ttl": "lease_ttl", "bach_size": "batch_size", "colour": ""} {
		if got := nearest(key, known); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
