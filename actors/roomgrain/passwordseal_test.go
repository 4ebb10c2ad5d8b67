package roomgrain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/prototext"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// noSnapshots refuses every snapshot: a room restarted over it rebuilds
// from its log alone.
type noSnapshots struct{ *memdb.Store }

func (noSnapshots) SaveSnapshot(context.Context, persistence.Snapshot) error {
	return errors.New("snapshots refused")
}

// The password's check value (its verifier: salt and MAC) is in no
// event: not in the stored events' payloads (what the outbox, IM, MQ
// and the event feeds carry), not in any reply or error, not in the
// log; neither is the password. It is kept sealed in the command log
// row, and a room restarted from the log alone (no snapshot) still
// checks the password: the right one admits, a wrong one is refused.
func TestPasswordCheckValueNeverInEvents(t *testing.T) {
	const secret = "Walnut-Orbit-4419"
	f := newFixture(t)
	var logs bytes.Buffer
	f.deps.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.deps.Config.PasswordKey = strings.Repeat("q", 32)
	f.deps.Store = noSnapshots{f.store}
	var seen strings.Builder // every reply and error
	do := func(pid *actor.PID, rc *v1.RoomCommand) error {
		r, err := f.do(pid, rc)
		seen.WriteString(prototext.Format(r))
		if err != nil {
			seen.WriteString(err.Error())
		}
		return err
	}
	join := func(pid *actor.PID, id, user, password string) error {
		return do(pid, wrap(&v1.JoinRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user, Password: password}))
	}
	pid := f.activate("app/r1")
	if err := do(pid, wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "locked"})); err != nil {
		t.Fatal(err)
	}
	if err := do(pid, wrap(&v1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app", RoomId: "r1", UserId: "owner", Password: secret})); err != nil {
		t.Fatal(err)
	}
	// A retry of the set answers from the log: the recorded reply too.
	if err := do(pid, wrap(&v1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app", RoomId: "r1", UserId: "owner", Password: secret})); err != nil {
		t.Fatal(err)
	}
	if err := join(pid, "j1", "alice", "wrong"); !errors.Is(err, room.ErrWrongPassword) {
		t.Fatalf("a wrong password: %v", err)
	}
	if err := join(pid, "j2", "alice", secret); err != nil {
		t.Fatalf("the password: %v", err)
	}
	if err := do(pid, rcGet()); err != nil {
		t.Fatal(err)
	}

	// Restarted with no snapshot: the log alone must rebuild the check.
	f.sys.Root.StopFuture(pid).Wait()
	pid = f.activate("app/r1")
	if err := join(pid, "j3", "bob", "guess"); !errors.Is(err, room.ErrWrongPassword) {
		t.Fatalf("after a restart from the log, a wrong password: %v", err)
	}
	if err := join(pid, "j4", "bob", secret); err != nil {
		t.Fatalf("after a restart from the log, the password: %v", err)
	}
	if _, err := f.store.LoadSnapshot(t.Context(), grainKey); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a snapshot was stored (%v): the restart did not replay the log alone", err)
	}

	recs, err := f.store.LoadCommands(t.Context(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	var events, sealed strings.Builder
	for _, r := range recs {
		sealed.Write(r.Sealed)
		for _, e := range r.Events {
			b, _ := json.Marshal(e) // the envelope as the outbox and IM carry it
			events.Write(b)
		}
	}
	var v room.Verifier
	if err := json.Unmarshal([]byte(sealed.String()), &v); err != nil || v.MAC == "" || v.Salt == "" {
		t.Fatalf("no sealed verifier in the log (%v): %q", err, sealed.String())
	}
	if v.MAC != room.PasswordMAC([]byte(f.deps.Config.PasswordKey), v.Salt, secret) {
		t.Fatal("the sealed verifier is not the password's")
	}
	if !strings.Contains(events.String(), `"has_password":true`) {
		t.Fatalf("RoomPasswordChanged does not say a password was set: %s", events.String())
	}
	for name, out := range map[string]string{"events": events.String(), "replies": seen.String(), "log": logs.String()} {
		if out == "" && name != "log" {
			t.Fatalf("%s: nothing captured", name)
		}
		for what, s := range map[string]string{"password": secret, "check value": v.MAC, "salt": v.Salt} {
			if strings.Contains(out, s) {
				t.Errorf("the %s is in the %s", what, name)
			}
		}
	}
}
