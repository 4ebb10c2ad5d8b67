// Package room (actors/room) runs rooms as Proto.Actor grains: the grain
// that serialises a room's commands through the rules of package room,
// persists them with their outbox rows in one append and rebuilds from
// snapshot + events on activation (grain.go); its ordered IM publisher
// and its directory worker (publisher.go, directory_worker.go: each a
// queue run on a dispatcher goroutine only while it has work, serial.go,
// dispatch.go); the node's registry of hosted rooms, whose one wheel
// spreads their directory refreshes and checks their idleness
// (directory_hosted.go); a room's logger, its fields added only when it
// writes (roomlog.go); and the client that reaches a grain wherever the
// cluster placed it (client.go).
//
// It must not know store, IM or wallet implementations: those come in
// through the small interfaces in grain.go. The grain kind is built by
// its user (cmd/roomcell) from Kind and GrainProps.
package room
