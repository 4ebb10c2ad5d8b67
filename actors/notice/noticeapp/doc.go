// Package noticeapp is the notice role's assembly (seed 003's
// internal/app): from opened stores, a publisher and an optional MQ
// subscriber it starts the enabled notice workers under the process's
// supervisor and the room_outbox consumer group, and stops them in order
// (consumer, then workers) before the process closes its stores. It opens
// nothing itself (the process picks memdb or MySQL, fake or real IM,
// JetStream), holds no notice rules (those are actors/notice and its
// modules), and must not import a store backend, grpcapi or cmd.
package noticeapp
