package trtc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
)

// script runs the same calls against a fresh fake, over loopback or in
// process (dev mode's wiring), and returns each call's outcome and what
// the fake recorded.
func script(t *testing.T, inProcess bool) (outcomes []string, calls []string) {
	t.Helper()
	fake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	var opts []trtc.Option
	if inProcess {
		opts = append(opts, trtc.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
	}
	c := newClient(t, fake, nil, opts...)
	forged := newClient(t, fake, func(cfg *configs.TRTCConfig) { cfg.SecretKey = "not-the-key" }, opts...)
	ctx := context.Background()
	outcome := func(err error) string {
		if err == nil {
			return "ok"
		}
		return fmt.Sprintf("error permanent=%v", permanent(err))
	}
	fake.EnterRoom("app_r1", "alice")
	fake.EnterRoom("app_r1", "bob")
	outcomes = append(outcomes, outcome(c.RemoveUser(ctx, "app_r1", "bob")))
	fake.FailNext(1, "InternalError")
	outcomes = append(outcomes, outcome(c.RemoveUser(ctx, "app_r1", "alice")))
	outcomes = append(outcomes, outcome(forged.RemoveUser(ctx, "app_r1", "alice")))
	outcomes = append(outcomes, outcome(c.DismissRoom(ctx, "app_r1")))
	outcomes = append(outcomes, fmt.Sprint(fake.InRoom("app_r1", "alice"), fake.RoomExists("app_r1"), fake.Dismissed("app_r1")))
	for _, call := range fake.Calls() {
		calls = append(calls, fmt.Sprint(call.Action, call.RoomID, call.UserIDs, call.Code, call.HTTPStatus))
	}
	return outcomes, calls
}

// Dev mode's TRTC client reaches the fake in process: every call, fault
// and refusal (a forged signature) comes out as over loopback, and the
// fake records the same calls.
func TestInProcessTransportServesLikeLoopback(t *testing.T) {
	loop, loopCalls := script(t, false)
	inp, inpCalls := script(t, true)
	if !reflect.DeepEqual(loop, inp) || !reflect.DeepEqual(loopCalls, inpCalls) {
		t.Fatalf("outcomes differ:\nloopback   %v %v\nin-process %v %v", loop, loopCalls, inp, inpCalls)
	}
	// The script exercised each kind of outcome.
	if inp[0] != "ok" || inp[1] != "error permanent=false" || inp[2] == "ok" || inp[3] != "ok" || len(inpCalls) != 4 ||
		!strings.Contains(inpCalls[1], "InternalError") || !strings.Contains(inpCalls[2], "SignatureFailure") {
		t.Fatalf("outcomes %v, calls %v", inp, inpCalls)
	}
}

// The in-process transport serves its own fake only, and nothing after
// the fake is closed.
func TestInProcessTransportRefusesOtherHostsAndAfterClose(t *testing.T) {
	fake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	rt := fake.Transport()
	req, _ := http.NewRequest(http.MethodPost, "http://example.com/", nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("served a request for another host")
	}
	c, err := trtc.New(fake.ClientConfig(), trtc.WithLogger(quiet), trtc.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	fake.Close()
	if err := c.RemoveUser(context.Background(), "app_r1", "bob"); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("a call after Close: %v, want the refusal", err)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("the closed fake recorded %d calls", n)
	}
}
