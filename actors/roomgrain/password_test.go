package roomgrain

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/prototext"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// A password-guessing client: 1,000 JoinRooms with wrong passwords are
// refused (WRONG_PASSWORD, then RATE_LIMITED before the password is even
// looked at: at most the bucket's burst are checked), and never admitted;
// the right password admits once the bucket refills, the owner and an
// admin need none, a banned user stays out with it, and the room asks for
// it after a restart too. The password appears in nothing the test can
// read: the node's log, every reply and error, the stored events, replies
// and request hashes of the log, and the snapshot.
func TestPasswordGuessingNeverAdmits(t *testing.T) {
	const secret = "Zebra-Quartz-7731"
	f := newFixture(t)
	var logs bytes.Buffer
	f.deps.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.deps.Config.PasswordKey = strings.Repeat("k", 32)
	f.deps.Config.SnapshotEvery = 2
	now := f.deps.Clock()
	f.deps.Clock = func() time.Time { return now }
	var seen strings.Builder // every reply and error
	do := func(pid *actor.PID, rc *v1.RoomCommand) (*v1.CommandReply, error) {
		r, err := f.do(pid, rc)
		seen.WriteString(prototext.Format(r))
		if err != nil {
			seen.WriteString(err.Error())
		}
		return r, err
	}
	join := func(pid *actor.PID, id, user, password string) error {
		_, err := do(pid, wrap(&v1.JoinRoomRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user, Password: password}))
		return err
	}
	pid := f.activate("app/r1")
	f.mustDo(pid, wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "locked", AdminUserIds: []string{"adm"}}))
	if _, err := do(pid, wrap(&v1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app", RoomId: "r1", UserId: "owner", Password: secret})); err != nil {
		t.Fatal(err)
	}
	if !f.mustDo(pid, rcGet()).GetRoom().GetHasPassword() {
		t.Fatal("GetRoom does not say the room has a password")
	}
	f.mustDo(pid, wrap(&v1.BanUserRequest{CommandId: "b1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "banned", BanSeconds: 3600}))

	wrong, limited := 0, 0
	for i := range 1000 {
		err := join(pid, fmt.Sprintf("g%d", i), "guesser", fmt.Sprintf("guess-%d", i))
		switch {
		case err == nil:
			t.Fatalf("try %d admitted the guesser", i)
		case errors.Is(err, room.ErrWrongPassword):
			wrong++
		case errors.Is(err, room.ErrRateLimited):
			limited++
		default:
			t.Fatalf("try %d: %v", i, err)
		}
		if i == 500 {
			// Some time passes: the bucket gives one try per interval.
			now = now.Add(2 * room.PasswordGuessEvery)
		}
	}
	if wrong != room.PasswordGuessBurst+2 || limited != 1000-wrong {
		t.Fatalf("%d wrong, %d rate limited: want %d checked, the rest limited", wrong, limited, room.PasswordGuessBurst+2)
	}
	if err := join(pid, "g-right", "guesser", secret); !errors.Is(err, room.ErrRateLimited) {
		t.Fatalf("the right password through an empty bucket: %v", err)
	}
	now = now.Add(room.PasswordGuessEvery)
	if err := join(pid, "g-right2", "guesser", secret); err != nil {
		t.Fatalf("the right password: %v", err)
	}
	if err := join(pid, "b-join", "banned", secret); !errors.Is(err, room.ErrBanned) {
		t.Fatalf("banned with the password: %v", err)
	}
	if err := join(pid, "a-join", "adm", ""); err != nil {
		t.Fatalf("an admin without a password: %v", err)
	}
	// After a restart the room still asks for it, and knows it.
	f.sys.Root.Stop(pid)
	pid = f.activate("app/r1")
	if err := join(pid, "x-none", "other", ""); !errors.Is(err, room.ErrWrongPassword) {
		t.Fatalf("after a restart, no password: %v", err)
	}
	if err := join(pid, "x-right", "other", secret); err != nil {
		t.Fatalf("after a restart, the right password: %v", err)
	}

	recs, err := f.store.LoadCommands(t.Context(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&stored, "%s %s %s\n", r.CommandID, r.RequestHash, r.Reply)
		for _, e := range r.Events {
			fmt.Fprintf(&stored, "%s %s\n", e.EventType, e.Payload)
		}
	}
	snap, err := f.store.LoadSnapshot(t.Context(), grainKey)
	if err != nil {
		t.Fatal(err)
	}
	stored.Write(snap.State)
	for name, out := range map[string]string{"log": logs.String(), "replies": seen.String(), "store": stored.String()} {
		if out == "" && name != "log" {
			t.Fatalf("%s: nothing captured", name)
		}
		if strings.Contains(out, secret) {
			t.Fatalf("the password is in the %s", name)
		}
	}
	if !strings.Contains(stored.String(), "RoomPasswordChanged") || !strings.Contains(string(snap.State), `"mac"`) {
		t.Fatalf("the verifier is not where the test looks: %s", stored.String())
	}
}
