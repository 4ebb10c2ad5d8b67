// Package outboxsend holds seed 000's per-send outbox metrics
// (room_outbox_publish_success_total, _failure_total, _latency_ms) shared
// by the two senders of room_outbox rows: the outbox relay and the room's
// own publisher. Each series carries sender="relay" or sender="publisher",
// so the seed's metrics count every publish, whichever path made it.
package outboxsend
