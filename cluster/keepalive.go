package cluster

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Keepalives on the cluster remote's connections. Without them a
// connection that crosses a network partition is never declared dead:
// Proto.Actor's endpoint writer blocks in a stream Send on it (HTTP/2 flow
// control, TCP retransmitting with backoff) and, after the partition
// heals, can stay blocked — found by the partition test
// (cluster/clustertest, TestMultiMemberProcessPartitionUnderLoad): a
// healed node's requests to one peer and that peer's replies to it timed
// out for the rest of the run (over 75 s). With keepalives, each side
// closes such a connection within seconds of the cut, the writer fails
// and stops, and the next message dials a fresh connection.
//
// The server pings a client after 2 s of silence and drops it 2 s later;
// clients ping after 10 s (grpc-go's minimum) and give up 2 s later. The
// server must allow the clients' pings (its default minimum interval is
// 5 minutes, and it would send GOAWAY "too_many_pings").
var (
	remoteKeepaliveServer = []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Second, Timeout: 2 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	remoteKeepaliveDial = []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}),
	}
)
