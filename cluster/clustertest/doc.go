// Package clustertest runs real roomcell processes: it builds
// ./cmd/roomcell into a temporary directory, writes one configuration
// file per node (loopback addresses, free ports, the etcd provider, a
// MariaDB database of the test's own), starts, signals and kills the
// processes and waits on their /readyz. Its tests (TestMultiMember*, run
// without -race by `make multimember`, three times by `make chaos`) cover
// failover, pauses under load (Truth: stale reads and wrong rejections),
// real network partitions (Network: each node in its own network
// namespace on a bridge, cut off by nft rules; needs root), rolling
// restarts, duplicate activations and forwarding cost across processes,
// etcd losing a member or its quorum (EtcdCluster: etcd processes of the
// test's own, on free ports and temporary data directories) and ten
// members' etcd traffic. With Options.RoomDBs or $ROOMCELL_TEST_ROOM_DBS
// (`make multimember-2db`) the rooms' shards are split across several
// room databases, the second on the :3307 MariaDB, and every check of
// the command log and the outbox reads them all; its deploy
// test parses every deploy/ YAML and loads the shipped configurations
// through configs.Load. It only reads the repository and talks to
// 127.0.0.1 or, with Options.Netns, to its own 10.77.X.0/24 bridge; it
// must not be imported by production code.
package clustertest
