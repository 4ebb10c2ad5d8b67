// Package relay is the per-node outbox relay of seed 000 (the "outbox
// compensation worker"): a supervised actor that polls room_outbox and
// publishes pending room events to IM, at least once, deduplicated by
// event_id on the client, in each room's room_seq order.
//
// Each batch claims up to batch_size due pending rows room by room
// (persistence.OutboxStore.ClaimPendingOutbox: one owner per room at a
// time, a room's lowest rows leased together under lease_ttl; rows the
// room's own publisher holds keep the room away from every relay). Rooms
// are published in parallel, each room's rows in order with
// publish_timeout each; a room's first failure ends its turn (its later
// rows are released unsent, so they never overtake it), other rooms go on.
// A failed row stays pending with retry_count+1, last_error (short,
// secret-free) and next_retry_at_ms from the retry strategy
// (fixed_interval: one poll_interval later, forever; exponential: capped
// and jittered), so it holds back only its own room and stops occupying
// claims. A row that can never succeed as it is (corrupt envelope, an IM
// error about the message itself) is parked for an operator (roomctl
// outbox requeue / skip); retryable errors are never parked. Non-IM events
// are marked published without a send.
//
// A full batch without failures is followed at once by the next, so a
// backlog drains at IM speed; otherwise the next batch waits
// poll_interval. A room with a backlog (a full claim it filled at least
// half of) makes the next claim double, up to hot_room_batch, and any
// other batch returns the claim to batch_size: a hot room's backlog then
// costs fewer claims and fuller coalesced messages (docs/benchmarks.md).
// After a clean round, a full claim spread over many rooms is settled
// (with an Enqueuer: its results read, its published marks written) while
// the next claim is taken and sent, up to 8 claims a round: each claim has
// its own lease owner, so the store never gives a room held by the claim
// still settling to the next one, and a room's rows are never in two
// claims at once.
//
// The MQ fanout (MQWorkerName, StartMQ, mqfanout.go) is a second worker
// beside the relay when the room_outbox topic is configured: it publishes
// every room event to the topic with its own progress on the row
// (persistence.OutboxMQStore: mq_status and its own lease), so the IM
// status above is the IM channel's alone. A broker outage leaves rows
// MQ-pending without re-sending IM; an IM outage leaves rows IM-pending
// without holding the topic back. The topic's per-room order is best
// effort (claims by age; a failed row releases its room's later rows, but
// two fanout workers may interleave a room); consumers use room_seq and
// dedupe by key (event_id). The actor is the shared poller shell of actors/supervise
// (one pending tick, restart with backoff after any panic, stop with
// wait); Relay.Stop cancels the batch between rows, so shutdown waits for
// at most the in-flight publishes and their marks. The relay reads and
// writes room_outbox only through persistence.OutboxStore; it never runs
// room commands, never writes the command log or snapshots, and must not
// import grpcapi.
package relay
