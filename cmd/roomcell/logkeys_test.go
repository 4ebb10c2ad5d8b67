package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
)

// A key the process logger carries is written once, whoever adds it
// again: With on a derived logger, or the call's own attrs; the first
// (outer) value wins. Groups keep their own keys.
func TestLogLinesHaveNoDuplicateKeys(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(configs.LogConfig{Level: "debug", RepeatInterval: time.Nanosecond}, &buf).With("node_id", "n1")
	store := log.With("component", "mysql").With("component", "persistence/mysql", "database", "hyapp_room")
	store.Info("opened", "node_id", "again", "database", "x", "took", 3)
	log.Info("call attrs", "a", 1, "a", 2)
	log.WithGroup("g").Info("grouped", "node_id", "inner")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{
		`msg=opened node_id=n1 component=mysql database=hyapp_room took=3`,
		`msg="call attrs" node_id=n1 a=1`,
		`msg=grouped node_id=n1 g.node_id=inner`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	for _, l := range lines {
		seen := map[string]bool{}
		for _, f := range strings.Fields(l) {
			k, _, ok := strings.Cut(f, "=")
			if ok && !strings.Contains(k, `"`) {
				if seen[k] {
					t.Errorf("key %s twice in %q", k, l)
				}
				seen[k] = true
			}
		}
	}
}

// --dev alone runs every README section: all four roles, the notice
// workers, members kept a day without heartbeats; a file's settings are
// the file's.
func TestDevRunsTheWholeTour(t *testing.T) {
	cfg, err := loadConfig(flags{dev: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{configs.RoleRoom, configs.RoleWallet, configs.RoleRelay, configs.RoleNotice} {
		if !cfg.HasRole(r) {
			t.Errorf("--dev lacks role %s: %v", r, cfg.Roles)
		}
	}
	if !cfg.Notice.WalletNoticeWorker.Enabled || !cfg.Notice.RoomNoticeWorker.Enabled {
		t.Errorf("--dev notice workers off: %+v %+v", cfg.Notice.WalletNoticeWorker, cfg.Notice.RoomNoticeWorker)
	}
	if cfg.Presence.StaleAfter != DevStaleAfter {
		t.Errorf("--dev presence.stale_after %s, want %s", cfg.Presence.StaleAfter, DevStaleAfter)
	}
	if g, h := cfg.ServingAddrs(); g != "127.0.0.1:13001" || h != "127.0.0.1:13101" {
		t.Errorf("--dev serves on %s %s, want the README's 13001/13101", g, h)
	}
}
