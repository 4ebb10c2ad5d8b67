// Package delivery is the parent of everything that carries roomcell's
// events out of the process: tencentim (the Tencent Cloud IM REST client:
// UserSig v2, error classes, per-API and per-group rate limits), imfake (a
// loopback Tencent IM server for tests and --dev), and roomim (room event →
// IM message mapping, hot-room coalescing, room groups and C2C notices), trtc
// (the TRTC server API and join tickets; trtc/trtcfake, its fake) and mq
// (the message-queue fanout of room_outbox: JetStream here, RocketMQ in the
// seed's production).
// The package itself declares the contract the room grain and the outbox
// relay call (contract.go: Publisher, Enqueuer), once.
// These packages read configuration from configs, what an event causes
// from its row in room's registry and the envelope from persistence; they
// never decide room state and never log the secret key or a UserSig. The
// one store they write is the outbox row's own progress: roomim records
// an event's finished effect steps (EffectSteps) so a retry elsewhere
// does not repeat them.
package delivery
