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
		Payload: []byte(`{"target_user_id":"u2","ban_until_ms":5000,"reason":"spam"}`)})
	if err != nil || fx.causes != room.IMBan|room.TRTCRemove || fx.target != (room.Target{UserID: "u2", UntilMs: 5000, Reason: "spam"}) {
		t.Fatalf("kick effects %+v, %v", fx, err)
	}
	if _, err := effectsOf(persistence.Envelope{EventType: room.TypeRoomMemberMuted, Payload: []byte(`{}`)}); err == nil {
		t.Fatal("a mute without a target was accepted")
	}
	if fx, err := effectsOf(persistence.Envelope{EventType: room.TypeRoomSeatMuted, Payload: []byte(`{}`)}); err != nil || fx.any() {
		t.Fatalf("a seat mute has effects at Tencent: %+v, %v", fx, err)
	}
}
