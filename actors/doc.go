// Package actors is the home of roomcell's Proto.Actor code and the
// node's workers, one sub-package per family: roomgrain (the room grain
// that runs package room's rules and keeps the command log, and the
// Observer list everything that follows a room attaches through),
// roomfeed (the room's event tail, ListRoomEvents and WatchRoom, an
// observer), departures (who left a room, when and why, explaining a
// not-member refusal: an observer), seatdeadline (each room's timer for
// its earliest seat request deadline, the expiry the room's own command:
// an observer), directory (the room directory, an
// observer; its JoinClock orders a user's joins on the node), storegate
// (whether a room database answers, one per database of the node, handed
// to the grains), outboxmarks (the sync publishers' marks of a room
// database, in batches, handed to the grains), wallet, relay
// (the outbox relay and the MQ fanout), presence, notice (the private
// notice workers), purge (retention), outboxsend (the outbox send metrics
// the relay and the room's publisher share) and supervise (the poller
// shell and supervision every worker shares). Actors here own their
// mailbox state only: everything durable goes through a persistence
// store, everything outbound through an injected publisher (delivery's
// contract), so each is tested on a real ActorSystem with go-memdb and
// fakes. This folder must not import grpcapi or cmd, and no actor reaches
// into another actor's state except by message (internal/layers).
package actors
