// Package clustertest runs real roomcell processes: it builds
// ./cmd/roomcell into a temporary directory, writes one configuration
// file per node (loopback addresses, free ports, the etcd provider, a
// MariaDB database of the test's own), starts, signals and kills the
// processes and waits on their /readyz. Its tests (TestMultiMember*, run
// without -race by `make multimember`, three times by `make chaos`) cover
// failover, pauses under load (Truth: stale reads and wrong rejections),
// rolling restarts, duplicate activations and forwarding cost across
// processes; its deploy
// test parses every deploy/ YAML and loads the shipped configurations
// through configs.Load. It only reads the repository and talks to
// 127.0.0.1; it must not be imported by production code.
package clustertest
