package grpcapi

import (
	"regexp"

	"github.com/hyapp/roomcell/persistence"
)

// roomDBKey is what a room database's key may look like to be told to a
// caller: the key of the shard map is configuration, not an address, so
// a caller may learn it (it tells an operator's client which database its
// rooms wait for); a key of other characters is not repeated.
var roomDBKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// roomDBOf is the key of the room database an outage is of
// (persistence.RoomDBError), "" for any other outage.
func roomDBOf(err error) string {
	key, ok := persistence.RoomDBOf(err)
	if !ok || !roomDBKey.MatchString(key) {
		return ""
	}
	return key
}

// roomDBSuffix is `(room database "KEY")` for an outage of one room
// database, "" for any other: the rest of an outage's text stays in the
// log.
func roomDBSuffix(err error) string {
	if key := roomDBOf(err); key != "" {
		return ` (room database "` + key + `")`
	}
	return ""
}
