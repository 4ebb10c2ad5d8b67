package roomim

import (
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Every effect at Tencent a row of the registry names is one this
// publisher does; a kind added to room/effects.go without its step here
// is refused (the event parks) rather than published without it.
func TestEveryRowsEffectIsDoneHere(t *testing.T) {
	seen := room.Effect(0)
	for _, typ := range room.EventTypes() {
		info, _ := room.EventInfoOf(typ)
		fx := info.Effects & (room.IMSide | room.AudioSide)
		if missing := fx &^ doneHere; missing != 0 {
			t.Errorf("%s causes %s, which the publisher does not do", typ, missing)
		}
		seen |= fx
	}
	if seen != doneHere {
		t.Errorf("the publisher does %s, the rows use %s", doneHere, seen)
	}
	// A row's effects come back from its envelope with their target.
	fx, err := effectsOf(persistence.Envelope{EventType: room.TypeRoomUserKicked,
		Payload: []byte(`{"target_user_id":"u2","ban_until_ms":5000,"reason":"spam"}`)}, false)
	if err != nil || fx.causes != room.IMRemove|room.TRTCRemove || fx.target != (room.Target{UserID: "u2", UntilMs: 5000, Reason: "spam"}) {
		t.Fatalf("kick effects %+v, %v", fx, err)
	}
	if _, err := effectsOf(persistence.Envelope{EventType: room.TypeRoomMemberMuted, Payload: []byte(`{}`)}, false); err == nil {
		t.Fatal("a mute without a target was accepted")
	}
	// A seat mute revokes the user's audio only with ticket enforcement.
	seatMuted := persistence.Envelope{EventType: room.TypeRoomSeatMuted, Payload: []byte(`{"seat":2,"user_id":"u3"}`)}
	if fx, err := effectsOf(seatMuted, false); err != nil || fx.any() {
		t.Fatalf("a seat mute without enforcement has effects at Tencent: %+v, %v", fx, err)
	}
	if fx, err := effectsOf(seatMuted, true); err != nil || fx.causes != room.TRTCRevoke || fx.target.UserID != "u3" {
		t.Fatalf("a seat mute with enforcement: %+v, %v", fx, err)
	}
	// A release of one's own seat revokes nothing (room.AudioRevoked).
	if fx, err := effectsOf(persistence.Envelope{EventType: room.TypeRoomMicReleased, Payload: []byte(`{"seat":2,"user_id":"u3"}`)}, true); err != nil || fx.any() {
		t.Fatalf("an own release has effects: %+v, %v", fx, err)
	}
}
