package roomgrain

import "time"

// ObserveLikes makes the node's likes observer (actors/roomlikes, which
// imports this package): set by likes_wire_test.go, an external test
// file that may import it, so that this package's tests run rooms with
// likes wired as cmd/roomcell wires them.
var ObserveLikes func(window time.Duration) NewObserver
