// Package relay is the per-node outbox relay of seed 000 (the "outbox
// compensation worker"): a supervised actor that polls room_outbox and
// publishes pending room events to IM, at least once, deduplicated by
// event_id on the client. Each batch claims up to batch_size pending rows
// under a lease (lease_ttl, so two relays never publish the same row in one
// round and a crashed relay's rows come back), publishes each with its own
// publish_timeout, and marks it published (last_error NULL) or failed
// (retry_count+1, a short secret-free last_error); one row's failure never
// stops the batch, and no row is ever dropped. Non-IM events are marked
// published without a send; a corrupt envelope is logged and stays pending.
// A full batch without failures is followed at once by the next, so a
// backlog drains at IM speed; otherwise the next batch waits poll_interval.
// Retry strategies: fixed_interval (the seed's: every poll) and exponential
// (capped, jittered, computed here from retry_count and updated_at_ms
// because the table has no next_retry_at_ms). A batch runs inside Receive,
// so a poison pill waits behind it; Relay.Stop first cancels the batch
// between rows, so shutdown waits for at most the one in-flight publish
// (publish_timeout) and its mark. The relay reads and writes room_outbox
// only through persistence.OutboxStore; it never runs room commands, never
// writes the command log or snapshots, and must not import grpcapi.
package relay
