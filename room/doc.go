// Package room is a voice-chat room's rules and vocabulary: its state,
// the command table (command.go: request fields, checks, rules), Decide
// (a command against the rules → events), Apply (events → the next
// state), the event registry (event.go: payload, effect on the state, IM
// and priority), the rule errors with their stable codes, and the mapping
// from the wire's RoomCommand (proto.go: the common header read once;
// CheckClientCommand is the one validation the gRPC layer calls).
//
// It is pure: no clock, no I/O, no actor. It imports only errclass and
// the generated API, so storage, delivery, the relay and the notice
// modules can name an event without pulling in Proto.Actor. The grain
// that runs these rules lives in actors/roomgrain.
package room
