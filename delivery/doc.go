// Package delivery is the parent of everything that carries roomcell's
// events out of the process: tencentim (the Tencent Cloud IM REST client:
// UserSig v2, error classes, per-API and per-group rate limits), imfake (a
// loopback Tencent IM server for tests and --dev), and roomim (room event →
// IM message mapping, hot-room coalescing, room groups and C2C notices) and mq
// (the message-queue fanout of room_outbox: JetStream here, RocketMQ in the
// seed's production).
// These packages read configuration from configs, event types from
// actors/room and the envelope from persistence; they never write to a
// store, never decide room state, and never log the secret key or a UserSig.
package delivery
