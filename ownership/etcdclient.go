package ownership

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// EtcdClientConfig is the client configuration both etcd users of a node
// (membership and ownership) dial with. What it changes from the
// library's defaults, and why:
//
//   - Keepalive pings on connections with a call under way (10 s, grpc-go's
//     minimum, then 2 s for the answer): a watch stream on a member that
//     froze (SIGSTOP, a VM pause) is dropped and reopened on another
//     member instead of waiting for the member forever. Pings without a
//     stream are not sent: etcd's server refuses them (its enforcement
//     policy does not permit them) and would close the connection.
//   - Reconnects after at most 1 s (grpc's default backoff grows to 2
//     minutes): a member that comes back after a 10 s outage is used
//     within a second, not after the backoff's next step, and a dial that
//     reaches a frozen member's listen queue gives up after 2 s.
//
// A call to a frozen member is not noticed by either: every call carries
// a deadline, and the renewals (Etcd.renewals, cluster's member lease)
// retry at once after one that ran out, which the client's round robin
// sends to the next member.
func EtcdClientConfig(endpoints []string, tc *tls.Config, username, password string, dial time.Duration) clientv3.Config {
	return clientv3.Config{
		Endpoints: endpoints, TLS: tc, Username: username, Password: password,
		DialTimeout:          dial,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
		// The client's zap logger warns on every retried call; the callers
		// log what matters through slog.
		Logger: zap.NewNop(),
	}
}

// Renewal is what RenewLease reports: Sent is when the try that got
// through was sent (etcd keeps the lease at least TTL seconds past it),
// Revision etcd's revision when it answered, Tries the attempts.
type Renewal struct {
	Sent     time.Time
	TTL      int64
	Revision int64
	Tries    int
}

// RenewLease renews lease once, retrying until etcd answers: each try is
// bounded by try, and a try that ran out (a frozen member, a member
// waiting for a leader that froze) is followed at once by the next, which
// the client's round robin sends to another member. It returns when a
// renewal got through, when etcd says the lease is gone
// (rpctypes.ErrLeaseNotFound: expired or revoked), or when ctx ends.
//
// A try that failed never counts as a lost lease: during an election or a
// quorum loss nobody can revoke it, and a new leader extends every lease
// by its TTL when it takes over (etcd's lessor, Promote), so the lease is
// there for the first renewal that reaches the new leader.
func RenewLease(ctx context.Context, c *clientv3.Client, lease clientv3.LeaseID, try time.Duration) (r Renewal, err error) {
	for {
		r.Tries++
		r.Sent = time.Now()
		cctx, cancel := context.WithTimeout(ctx, try)
		resp, err := c.KeepAliveOnce(cctx, lease)
		cancel()
		switch {
		case err == nil:
			r.TTL = resp.TTL
			if resp.ResponseHeader != nil {
				r.Revision = resp.ResponseHeader.Revision
			}
			return r, nil
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return r, err
		case ctx.Err() != nil:
			return r, ctx.Err()
		}
		// An error that came back at once (a member without a leader
		// refusing, a connection refused) is not retried in a busy loop.
		if wait := renewRetryGap - time.Since(r.Sent); wait > 0 {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// renewRetryGap is the least time between two tries of one renewal.
const renewRetryGap = 25 * time.Millisecond
