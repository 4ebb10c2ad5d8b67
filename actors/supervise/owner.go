package supervise

import (
	"crypto/rand"
	"encoding/hex"
)

// LeaseOwner names one incarnation of a worker in the rows it leases:
// "<nodeID>/<random>". A restarted worker gets a new name, so it does not
// inherit the leases of the one that crashed: those expire and come back.
func LeaseOwner(nodeID string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return nodeID + "/" + hex.EncodeToString(b[:])
}
