package main

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
)

func TestNoticeOnlyProcessUsesSeedPortsUnlessFlagsSay(t *testing.T) {
	cfg, err := loadConfig(flags{dev: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Roles = []string{configs.RoleNotice}
	if g, h := cfg.ServingAddrs(); g != "127.0.0.1:13009" || h != "127.0.0.1:13109" {
		t.Fatalf("notice-only addrs %s %s, want seed 003's 13009/13109", g, h)
	}
	cfg, err = loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:5001", httpAddr: "127.0.0.1:5002"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Roles = []string{configs.RoleNotice}
	if g, h := cfg.ServingAddrs(); g != "127.0.0.1:5001" || h != "127.0.0.1:5002" {
		t.Fatalf("flags ignored for a notice-only process: %s %s", g, h)
	}
}

func TestBadFlagsAndConfigAreErrors(t *testing.T) {
	if _, err := loadConfig(flags{}); err == nil {
		t.Fatal("neither --dev nor --config: want an error")
	}
	if _, err := loadConfig(flags{dev: true, logLevel: "chatty"}); err == nil {
		t.Fatal("bad --log-level: want an error")
	}
	if _, err := loadConfig(flags{config: "does-not-exist.yaml"}); err == nil {
		t.Fatal("missing config file: want an error")
	}
}

// Seed 003's production block loads (roomcell --config accepts the seed's
// shape), passes the start check, and its rocketmq block dials: the
// client is made without waiting for the placeholder name server (a
// host name, reached as http://host:port; publishes and the consumer
// say it is unreachable until it is).
func TestSeedRocketMQBlockLoadsAndDials(t *testing.T) {
	t.Setenv("TENCENT_IM_SECRET_KEY", "s3cret")
	cfg, err := loadConfig(flags{config: "../../configs/testdata/seed003_production.yaml", grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("seed 003's production block must load: %v", err)
	}
	if err := cfg.CheckStart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialMQ(ctx, cfg.Notice.MQ, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("dial the seed's rocketmq block: %v", err)
	}
	c.Close()
}

func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(int64(s[0].Value.Uint64()))
}

// The server process holds the GC floor while it serves and gives the
// process's GC percent back when it stops; with the floor at 0 it never
// touches it. (Start alone, as tests and embedders call it, leaves it.)
func TestServeHoldsTheGCFloor(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := gcPercent()
	for _, floorMB := range []int{configs.DefaultGCHeapFloorMB, 0} {
		cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Runtime.GCHeapFloorMB = &floorMB
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, log, true) }()
		raised := false
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !raised; {
			runtime.GC()
			time.Sleep(20 * time.Millisecond)
			raised = gcPercent() > base
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("floor %d MiB: serve: %v", floorMB, err)
		}
		if want := floorMB > 0; raised != want {
			t.Errorf("floor %d MiB: GC percent raised above %d while serving: %v, want %v", floorMB, base, raised, want)
		}
		if got := gcPercent(); got != base {
			t.Errorf("floor %d MiB: GC percent %d after serve returned, want %d", floorMB, got, base)
		}
	}
}
