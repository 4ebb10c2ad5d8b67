// Package cluster starts and stops this process's Proto.Actor cluster
// member: the actor system (with our slog logger and the global OTel meter
// provider set first), the remote, the provider chosen by config (single,
// automanaged, etcd), disthash identity lookup and the grain kinds the
// caller passes in. It knows no domain: kinds come from actors/. It must
// not touch stores or delivery.
package cluster
