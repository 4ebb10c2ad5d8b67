// Package room owns a voice-chat room: the pure state machine (state.go,
// decide.go, apply.go, event.go, command.go: no clock, no I/O, no actor —
// Decide checks a command against the rules and returns events,
// ApplyCommand folds them into a new state). A command is one row of the
// command table (command.go: request fields, checks, rules) and an event
// one row of the event registry (event.go: payload, effect on the state,
// IM and priority); proto.go reads the common header once and
// CheckClientCommand is the one validation the gRPC layer calls.
//
// It also owns the room grain that serialises a room's commands, persists
// them with their outbox rows in one append and rebuilds from snapshot +
// events on activation (grain.go); its ordered IM publisher and its
// directory worker (publisher.go, directory_worker.go: each a queue run on
// a dispatcher goroutine only while it has work, serial.go, dispatch.go);
// the node's registry of hosted rooms, whose one wheel spreads their
// directory refreshes and checks their idleness (directory_hosted.go); a
// room's logger, its fields added only when it writes (roomlog.go); and
// the client that reaches a grain wherever the cluster placed it
// (client.go).
//
// It must not know store, IM or wallet implementations: those come in
// through the small interfaces in grain.go.
package room
