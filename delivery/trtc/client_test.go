package trtc_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
)

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T, mod func(*configs.TRTCConfig), opts ...trtc.Option) (*trtcfake.Server, *trtc.Client) {
	t.Helper()
	fake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	return fake, newClient(t, fake, mod, opts...)
}

// newClient is a client of fake, its configuration changed by mod.
func newClient(t *testing.T, fake *trtcfake.Server, mod func(*configs.TRTCConfig), opts ...trtc.Option) *trtc.Client {
	t.Helper()
	cfg := fake.ClientConfig()
	if mod != nil {
		mod(&cfg)
	}
	c, err := trtc.New(cfg, append([]trtc.Option{trtc.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func TestRemoveAndDismiss(t *testing.T) {
	fake, c := setup(t, nil)
	ctx := context.Background()
	fake.EnterRoom("lalu_r1", "alice")
	fake.EnterRoom("lalu_r1", "bob")
	if err := c.RemoveUser(ctx, "lalu_r1", "bob"); err != nil {
		t.Fatal(err)
	}
	if fake.InRoom("lalu_r1", "bob") || !fake.InRoom("lalu_r1", "alice") {
		t.Fatal("bob must be out, alice in")
	}
	// Idempotent: a user not in the room, a room nobody is in.
	if err := c.RemoveUser(ctx, "lalu_r1", "bob"); err != nil {
		t.Fatalf("remove again: %v", err)
	}
	if err := c.RemoveUser(ctx, "lalu_nobody", "bob"); err != nil {
		t.Fatalf("remove from a room that does not exist: %v", err)
	}
	if err := c.DismissRoom(ctx, "lalu_r1"); err != nil {
		t.Fatal(err)
	}
	if fake.RoomExists("lalu_r1") || fake.Dismissed("lalu_r1") != 1 {
		t.Fatal("room must be dismissed once")
	}
	if err := c.DismissRoom(ctx, "lalu_r1"); err != nil {
		t.Fatalf("dismiss again: %v", err)
	}
	for _, call := range fake.Calls() {
		if call.Action != trtc.ActionRemoveUser && call.Action != trtc.ActionDismissRoom {
			t.Fatalf("unexpected action %q", call.Action)
		}
	}
}

func TestErrorsClassified(t *testing.T) {
	ctx := context.Background()
	t.Run("outage is retryable", func(t *testing.T) {
		fake, c := setup(t, nil)
		fake.SetFailing("InternalError")
		err := c.RemoveUser(ctx, "r", "u")
		if trtc.CodeOf(err) != "InternalError" || permanent(err) {
			t.Fatalf("InternalError: %v (permanent %v)", err, permanent(err))
		}
		fake.SetFailing("")
		fake.SetHTTPStatus(502)
		if err := c.DismissRoom(ctx, "r"); err == nil || permanent(err) {
			t.Fatalf("502: %v", err)
		}
	})
	t.Run("bad parameter is permanent", func(t *testing.T) {
		_, c := setup(t, nil)
		err := c.RemoveUser(ctx, strings.Repeat("x", 65), "u")
		if trtc.CodeOf(err) != "InvalidParameterValue.RoomId" || !permanent(err) {
			t.Fatalf("long room id: %v (permanent %v)", err, permanent(err))
		}
	})
	t.Run("wrong key is refused, not permanent, and not in the error", func(t *testing.T) {
		var key string
		_, c := setup(t, func(cfg *configs.TRTCConfig) { cfg.SecretKey += "x"; key = cfg.SecretKey })
		err := c.RemoveUser(ctx, "r", "u")
		if trtc.CodeOf(err) != "AuthFailure.SignatureFailure" || permanent(err) {
			t.Fatalf("wrong key: %v", err)
		}
		if strings.Contains(err.Error(), key) {
			t.Fatal("error text holds the secret key")
		}
	})
	t.Run("clock skew is refused", func(t *testing.T) {
		_, c := setup(t, nil, trtc.WithClock(func() time.Time { return time.Now().Add(-10 * time.Minute) }))
		if err := c.RemoveUser(ctx, "r", "u"); trtc.CodeOf(err) != "AuthFailure.SignatureExpire" {
			t.Fatalf("skewed clock: %v", err)
		}
	})
	t.Run("wrong app", func(t *testing.T) {
		_, c := setup(t, func(cfg *configs.TRTCConfig) { cfg.SDKAppID++ })
		if err := c.DismissRoom(ctx, "r"); trtc.CodeOf(err) != "UnauthorizedOperation.SdkAppId" || permanent(err) {
			t.Fatalf("wrong app: %v", err)
		}
	})
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	for _, cfg := range []configs.TRTCConfig{
		{SecretID: "a", SecretKey: "b"},
		{SDKAppID: 1, SecretKey: "b"},
		{SDKAppID: 1, SecretID: "a"},
		{SDKAppID: 1, SecretID: "a", SecretKey: "b", Endpoint: "ftp://x"},
	} {
		if _, err := trtc.New(cfg); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
}
