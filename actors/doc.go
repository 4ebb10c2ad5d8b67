// Package actors is the home of roomcell's Proto.Actor code, one
// sub-package per actor family: room (the room grain and its pure state
// machine), relay (the per-node outbox relay that publishes pending
// room_outbox rows to IM), supervise (the supervision, stop and polling
// helpers every worker actor shares), and later wallet and the notice
// workers. Actors here own their mailbox state only: everything durable goes
// through a persistence store, everything outbound through an injected
// publisher, so each actor can be tested on a real ActorSystem with go-memdb
// and fakes. This folder must not import grpcapi or cmd, and no actor may
// reach into another actor's state except by message.
package actors
