package room_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// replayJSON applies events as a log row gives them back: each through
// its JSON payload, then the row's sealed part attached.
func replayJSON(t *testing.T, s room.State, evs []room.Event, sealed []byte) room.State {
	t.Helper()
	back := make([]room.Event, len(evs))
	for i, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if back[i], err = room.DecodeEvent(e.EventType(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := room.Unseal(back, sealed); err != nil {
		t.Fatal(err)
	}
	return room.ApplyCommand(s, s.Seq+1, back)
}

// The verifier never goes into a payload: the event says a password was
// set, the row's sealed part carries the verifier, and a replay with it
// checks as the live room does. Replayed without it (a row stored
// without), the room fails closed: the right password no longer admits,
// the owner still gets in. A log written when events carried the
// verifier replays as it did.
func TestPasswordVerifierIsSealedNotInThePayload(t *testing.T) {
	base := given(t, aRoom...)
	set := setPassword("owner", "open sesame")
	evs, err := room.Decide(base, set)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(evs[0])
	if strings.Contains(string(payload), set.PasswordMAC) || strings.Contains(string(payload), "s1") || !strings.Contains(string(payload), `"has_password":true`) {
		t.Fatalf("payload %s", payload)
	}
	sealed := room.SealedOf(evs)
	if !strings.Contains(string(sealed), set.PasswordMAC) {
		t.Fatalf("sealed %s", sealed)
	}
	live := room.ApplyCommand(base, base.Seq+1, evs)
	replayed := replayJSON(t, base, evs, sealed)
	for name, s := range map[string]room.State{"live": live, "replayed": replayed} {
		if _, err := room.Decide(s, joinWith("carol", "open sesame")); err != nil {
			t.Fatalf("%s: the right password: %v", name, err)
		}
		if _, err := room.Decide(s, joinWith("carol", "nope")); !errors.Is(err, room.ErrWrongPassword) {
			t.Fatalf("%s: a wrong password: %v", name, err)
		}
	}
	unsealed := replayJSON(t, base, evs, nil)
	if _, err := room.Decide(unsealed, joinWith("carol", "open sesame")); !errors.Is(err, room.ErrWrongPassword) || !unsealed.HasPassword() {
		t.Fatalf("replayed without its sealed part: %v (has password %v)", err, unsealed.HasPassword())
	}
	if _, err := room.Decide(then1(unsealed, leave("owner")), join("owner")); err != nil {
		t.Fatalf("the owner of a room without its verifier: %v", err)
	}
	old := `{"verifier":{"salt":"s1","mac":"` + set.PasswordMAC + `"},"operator_user_id":"owner"}`
	ev, err := room.DecodeEvent(room.TypeRoomPasswordChanged, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.Decide(room.ApplyCommand(base, base.Seq+1, []room.Event{ev}), joinWith("carol", "open sesame")); err != nil {
		t.Fatalf("an old log's password: %v", err)
	}
	if err := room.Unseal([]room.Event{room.RoomUserJoined{UserID: "x"}}, sealed); err == nil {
		t.Fatal("a sealed part without its event accepted")
	}
}

func then1(s room.State, c room.Command) room.State {
	evs, err := room.Decide(s, c)
	if err != nil {
		panic(err)
	}
	return room.ApplyCommand(s, s.Seq+1, evs)
}
