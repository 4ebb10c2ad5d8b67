// Package cluster starts, watches and stops this process's Proto.Actor
// cluster member: the actor system (with our slog logger and the global
// OTel meter provider set first), the remote, the membership provider
// chosen by config (single: the library's in-memory provider; automanaged
// and etcd: our own, see etcd.go and automanaged.go for why the library's
// are not used), the identity lookup and placement actor that put a grain
// on the owner of its shard and activate it only under the shard lease
// (lookup.go; the ownership table comes from package ownership), and the
// grain kinds the caller passes in (package kind makes the lighter ones:
// the placement sends their ClusterInit itself). It owns readiness (WaitReady), membership logging and
// metrics, the rejoin of a member the cluster dropped, the graceful drain,
// and the member reports behind ClusterAdmin (Survey, Owner). It knows no
// domain: kinds come from actors/. It must not touch stores or delivery.
package cluster
