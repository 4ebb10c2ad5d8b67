package configs

import (
	"strings"
	"testing"
)

// A short room.password_key stops the start naming the key (a short key
// lets whoever reads a room's events guess its password offline); none,
// or one long enough, is accepted.
func TestRoomPasswordKeyLength(t *testing.T) {
	_, err := Parse([]byte("room: {password_key: \"too-short\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "room.password_key") {
		t.Fatalf("short key: %v", err)
	}
	for _, y := range []string{"", "room: {password_key: \"" + strings.Repeat("k", MinPasswordKeyLen) + "\"}\n"} {
		if _, err := Parse([]byte(y)); err != nil {
			t.Fatalf("%q refused: %v", y, err)
		}
	}
}
