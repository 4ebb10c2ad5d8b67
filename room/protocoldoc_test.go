package room_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// TestEveryEventTypeHasADocRow: a client rebuilds the room from the
// events with docs/client-protocol.md's rules alone, so every event type
// of the registry has a row there (a table row starting with its name),
// and the doc names no event type the registry does not know.
func TestEveryEventTypeHasADocRow(t *testing.T) {
	doc, err := os.ReadFile("../docs/client-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Room[A-Za-z]+)`").FindAllSubmatch(doc, -1) {
		rows[string(m[1])] = true
	}
	known := map[string]bool{}
	for _, typ := range room.EventTypes() {
		known[typ] = true
		if !rows[typ] {
			t.Errorf("event type %s has no row in docs/client-protocol.md (payload and what a client does with it)", typ)
		}
	}
	for typ := range rows {
		if !known[typ] {
			t.Errorf("docs/client-protocol.md has a row for %s, which is no event type", typ)
		}
	}
}
