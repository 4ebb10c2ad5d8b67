package grpcapi

import "regexp"

// roomDBRef finds the room database a refusal names (the room store
// gate's `room database "KEY"`); the key of the shard map is
// configuration, not an address, so a caller may learn it: it tells an
// operator's client which database its rooms wait for.
var roomDBRef = regexp.MustCompile(`room database "([A-Za-z0-9_.-]{1,64})"`)

// roomDBSuffix is `(room database "KEY")` for an outage of one room
// database, "" for any other: the rest of an outage's text stays in the
// log.
func roomDBSuffix(err error) string {
	m := roomDBRef.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	return ` (room database "` + m[1] + `")`
}
