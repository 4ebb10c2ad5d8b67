package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/hyapp/roomcell/configs"
)

// parsedFlags runs the command line's parsing and its environment pass,
// as a start does, without serving.
func parsedFlags(t *testing.T, args ...string) flags {
	t.Helper()
	var f flags
	root := newRoot(&f, &bytes.Buffer{}, &bytes.Buffer{})
	if err := root.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := flagsFromEnv(root.Flags(), os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	return f
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "roomcell.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A setting comes from the flag, else its environment variable, else the
// file, else the default; --dev's settings sit under the file.
func TestConfigPrecedenceFlagEnvFileDefault(t *testing.T) {
	file := writeFile(t, `
log: {level: warn}
presence: {stale_after: 10s, batch_size: 7}
gateway: {addr: "127.0.0.1:18001"}
redis: {key_prefix: "from-file:"}
`)
	t.Setenv("ROOMCELL_LOG_LEVEL", "error")               // flag's variable, beaten by the flag
	t.Setenv("ROOMCELL_PRESENCE_STALE_AFTER", "20s")      // a key's variable, beats the file
	t.Setenv("ROOMCELL_GATEWAY_ADDR", "127.0.0.1:18002")  // flag's variable, beats the file
	t.Setenv("ROOMCELL_ROLES", "room, wallet,relay")      // a list, comma-separated
	t.Setenv("ROOMCELL_RETENTION_ENABLED", "false")       // a *bool key
	t.Setenv("ROOMCELL_RATE_LIMITS_GIFT_USER_BURST", "9") // deep in a block the file does not have
	f := parsedFlags(t, "--dev", "--config", file, "--log-level", "debug")
	cfg, err := loadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"flag over its variable", cfg.Log.Level, "debug"},
		{"variable over file", cfg.Presence.StaleAfter, 20 * time.Second},
		{"flag variable over file", cfg.Gateway.Addr, "127.0.0.1:18002"},
		{"file over --dev and default", cfg.Presence.BatchSize, 7},
		{"file over default", cfg.Redis.KeyPrefix, "from-file:"},
		{"list variable", strings.Join(cfg.Roles, ","), "room,wallet,relay"},
		{"*bool variable", cfg.Retention.Enabled != nil && !*cfg.Retention.Enabled, true},
		{"deep variable", cfg.RateLimits.Gift.UserBurst, 9},
		{"--dev under the file: notice workers", cfg.Notice.WalletNoticeWorker.Enabled && cfg.Notice.RoomNoticeWorker.Enabled, true},
		{"default", cfg.Presence.ScanInterval, 5 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}

	// Without the variables the file's values hold, and --dev's where
	// the file is silent.
	os.Unsetenv("ROOMCELL_PRESENCE_STALE_AFTER")
	os.Unsetenv("ROOMCELL_GATEWAY_ADDR")
	os.Unsetenv("ROOMCELL_ROLES")
	cfg, err = loadConfig(parsedFlags(t, "--dev", "--config", file))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Presence.StaleAfter != 10*time.Second || cfg.Gateway.Addr != "127.0.0.1:18001" || cfg.Log.Level != "error" {
		t.Errorf("file layer: stale_after %s gateway %q level %q", cfg.Presence.StaleAfter, cfg.Gateway.Addr, cfg.Log.Level)
	}
	if !cfg.HasRole(configs.RoleNotice) {
		t.Errorf("--dev --config dropped --dev's roles: %v", cfg.Roles)
	}
	cfg, err = loadConfig(parsedFlags(t, "--dev", "--config", writeFile(t, "node_id: n1\n")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Presence.StaleAfter != DevStaleAfter || cfg.NodeID != "n1" {
		t.Errorf("--dev --config with a silent file: stale_after %s node %q, want %s n1", cfg.Presence.StaleAfter, cfg.NodeID, DevStaleAfter)
	}
}

// A variable is checked like the file's key and its error names it; a
// flag's variable with a bad value is an error naming the variable.
func TestEnvMistakesNameTheVariable(t *testing.T) {
	t.Setenv("ROOMCELL_PRESENCE_STALE_AFTER", "60")
	_, err := loadConfig(flags{dev: true})
	if err == nil || !strings.Contains(err.Error(), "ROOMCELL_PRESENCE_STALE_AFTER") || !strings.Contains(err.Error(), "presence.stale_after") {
		t.Fatalf("bad duration variable: %v", err)
	}
	os.Unsetenv("ROOMCELL_PRESENCE_STALE_AFTER")
	t.Setenv("ROOMCELL_REDIS_DB", "zero")
	if _, err := loadConfig(flags{dev: true}); err == nil || !strings.Contains(err.Error(), "ROOMCELL_REDIS_DB") {
		t.Fatalf("bad int variable: %v", err)
	}
	os.Unsetenv("ROOMCELL_REDIS_DB")
	t.Setenv("ROOMCELL_DEV", "maybe")
	var f flags
	root := newRoot(&f, &bytes.Buffer{}, &bytes.Buffer{})
	if err := flagsFromEnv(root.PersistentFlags(), os.LookupEnv); err == nil || !strings.Contains(err.Error(), "ROOMCELL_DEV") {
		t.Fatalf("bad flag variable: %v", err)
	}
	// The whole command: ROOMCELL_DEV alone is --dev (here with a bad
	// level from the environment, so it stops before serving).
	t.Setenv("ROOMCELL_DEV", "true")
	t.Setenv("ROOMCELL_LOG_LEVEL", "chatty")
	code, _, errOut := runCell()
	if code != 2 || !strings.Contains(errOut, "log.level") {
		t.Fatalf("ROOMCELL_DEV with a bad ROOMCELL_LOG_LEVEL: exit %d %q", code, errOut)
	}
}

// README's environment table names every flag's variable and the rule
// for the config keys, and the rule's names are one per key.
func TestEveryFlagAndKeyHasADocumentedVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| flag | environment variable |")
	if !ok {
		t.Fatal(`README has no "| flag | environment variable |" table`)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var f flags
	root := newRoot(&f, &bytes.Buffer{}, &bytes.Buffer{})
	n := 0
	root.PersistentFlags().VisitAll(func(fl *pflag.Flag) {
		n++
		if fl.Name == "help" || fl.Name == "version" {
			return
		}
		row := regexp.MustCompile("(?m)^\\| `--" + regexp.QuoteMeta(fl.Name) + "[ `].*`" + FlagEnv(fl.Name) + "`")
		if !row.MatchString(table) {
			t.Errorf("README's table lacks the row of --%s (%s)", fl.Name, FlagEnv(fl.Name))
		}
	})
	if n < 10 {
		t.Errorf("only %d flags seen", n)
	}
	if !strings.Contains(table, "`ROOMCELL_PRESENCE_STALE_AFTER=24h`") {
		t.Error("README's table does not show the config keys' rule (ROOMCELL_PRESENCE_STALE_AFTER)")
	}
	seen := map[string]string{}
	for _, k := range configs.EnvKeys() {
		n := configs.EnvName(k)
		if prev, dup := seen[n]; dup {
			t.Errorf("%s is the variable of both %s and %s", n, prev, k)
		}
		seen[n] = k
	}
	if len(seen) < 100 {
		t.Errorf("only %d config keys settable from the environment", len(seen))
	}
}
