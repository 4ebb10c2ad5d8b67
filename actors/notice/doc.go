// Package notice is seed 003's notice delivery: the shared state machine of
// notice_delivery_events (delivering → delivered, or retryable with an
// exponential backoff in next_retry_at_ms, or failed after max_retry_count
// retries: a dead letter only an operator's requeue brings back; the table's
// contract and row types are persistence.NoticeStore and NoticeDelivery), the worker
// (Worker.Round: scan the module's owner outbox into the table under the
// cursor lease, claim due rows under a lease of lock_ttl, send each as a
// C2C TIMCustomElem through the Publisher, mark it) and its supervised
// polling actor (Start, Kick, Stop), and the metrics. Modules live in
// sub-packages, one per business domain: walletnotice (wallet_outbox) and
// roomnotice (room_outbox RoomUserKicked); noticeapp assembles them for the
// process.
//
// Guarantees. The primary key (source_name, app_code, source_event_id,
// channel) is the idempotency boundary: a fact ingested twice (a rescan,
// two instances, the MySQL scan and the MQ consumer) is one row, and a row
// is held by one lease owner at a time, so two instances never send the
// same notice at once. A send that succeeded but whose delivered mark was
// lost (a crash, a store outage) is sent once more after its lease
// expires; the client drops it by event_id. The workers read owner outboxes
// through read-only sources and never write them; they write only their
// own tables. This package must not import a store backend, grpcapi or cmd.
package notice
