package configs

import (
	"strings"
	"testing"
)

// room.ranking.zone: an unknown zone, or "Local" (each node's own),
// stops the start naming the key; empty (UTC) and IANA names pass, the
// environment included.
func TestRankingZone(t *testing.T) {
	for _, bad := range []string{"Mars/Olympus", "Local", "+08:00"} {
		_, err := Parse([]byte("room: {ranking: {zone: \"" + bad + "\"}}\n"))
		if err == nil || !strings.Contains(err.Error(), "room.ranking.zone") {
			t.Errorf("zone %q: %v", bad, err)
		}
	}
	for _, good := range []string{"", "UTC", "Asia/Shanghai", "America/Sao_Paulo"} {
		c, err := Parse([]byte("room: {ranking: {zone: \"" + good + "\"}}\n"))
		if err != nil || c.Room.Ranking.Zone != good {
			t.Errorf("zone %q: %v (%q)", good, err, c.Room.Ranking.Zone)
		}
	}
	if EnvName("room.ranking.zone") != "ROOMCELL_ROOM_RANKING_ZONE" {
		t.Errorf("variable %s", EnvName("room.ranking.zone"))
	}
}
