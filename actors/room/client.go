package room

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// Client sends commands to room grains wherever the cluster placed them.
// It wraps cluster.Request with the caller's deadline and its own backoff:
// cluster.RequestFuture leaks options process-wide and the library's retry
// sleeps nanoseconds.
type Client struct {
	Cluster *cluster.Cluster
	// AttemptTimeout bounds one attempt (default 3s); the caller's
	// deadline bounds them all (default 5s when it has none).
	AttemptTimeout time.Duration
	// Owners, when set, cuts an attempt short as soon as the room's owner
	// changes (the node it was sent to died, froze or gave the room up):
	// the attempt is retried on the new owner at once instead of waiting
	// out AttemptTimeout. Its answer, if it ever comes, is dropped; a
	// retry is safe (command_id), and an old owner cannot write once the
	// new one has claimed the room (epoch fence).
	Owners Owners
}

// Owners is the part of the ownership table the client follows.
type Owners interface {
	Owner(identity string) string
	Changed() <-chan struct{}
}

// Execute runs one command in its room grain. A retried attempt is safe:
// commands are idempotent by command_id.
func (c *Client) Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	app, room := KeyOf(rc)
	if err := CheckID("app_code", app); err != nil {
		return nil, err
	}
	if err := CheckID("room_id", room); err != nil {
		return nil, err
	}
	identity := app + "/" + room
	attemptMax := c.AttemptTimeout
	if attemptMax <= 0 {
		attemptMax = 3 * time.Second
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	backoff := 20 * time.Millisecond
	var lastErr error
	var changed <-chan struct{} // nil (never ready) without Owners
	for {
		if c.Owners != nil {
			changed = c.Owners.Changed()
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			break
		}
		res, err := c.attempt(identity, rc, min(remaining, attemptMax))
		if err == nil {
			reply, err := replyOf(res)
			if !errors.Is(err, errMoved) {
				return reply, err
			}
			// A grain whose node lost the room: it has stopped; ask the
			// owner again (not the cached grain).
			c.Cluster.PidCache.Remove(identity, Kind)
		}
		lastErr = err
		if errors.Is(err, errOwnerChanged) {
			continue
		}
		// An ownership change ends the wait: the room may have just
		// found its new owner (a failover is over the moment it does).
		select {
		case <-ctx.Done():
		case <-changed:
		case <-time.After(min(backoff, time.Until(deadline))):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, ctx.Err()
	}
	if lastErr == nil {
		lastErr = context.DeadlineExceeded
	}
	return nil, fmt.Errorf("%w: room %s did not answer in time: %v", ErrUnavailable, identity, lastErr)
}

// errOwnerChanged: the room changed owner during the attempt.
var errOwnerChanged = errors.New("room changed owner during the request")

// attempt is one cluster.Request, abandoned early when the room's owner
// changes meanwhile (with Owners set).
func (c *Client) attempt(identity string, rc *v1.RoomCommand, timeout time.Duration) (any, error) {
	call := func() (any, error) {
		return c.Cluster.Request(identity, Kind, rc, cluster.WithTimeout(timeout), cluster.WithRetryCount(1))
	}
	if c.Owners == nil {
		return call()
	}
	changed := c.Owners.Changed()
	owner := c.Owners.Owner(identity)
	// A grain cached on a node that no longer owns the room (it died or
	// gave the room up) would cost this attempt a dead letter or a
	// timeout: ask the owner instead.
	if pid, ok := c.Cluster.PidCache.Get(identity, Kind); ok && owner != "" && pid.Address != owner {
		c.Cluster.PidCache.Remove(identity, Kind)
	}
	type result struct {
		res any
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := call()
		done <- result{res, err}
	}()
	for {
		select {
		case r := <-done:
			return r.res, r.err
		case <-changed:
			changed = c.Owners.Changed()
			if now := c.Owners.Owner(identity); now != owner && now != "" {
				c.Cluster.PidCache.Remove(identity, Kind)
				return nil, errOwnerChanged
			}
		}
	}
}

func replyOf(res any) (*v1.CommandReply, error) {
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		return nil, fmt.Errorf("room grain answered %T", res)
	}
	if r.Error != nil {
		if r.Error.Class == ClassUnavailable && r.Error.Message == errMoved.Error() {
			return nil, errMoved
		}
		return nil, ErrorFromClass(r.Error.Class, r.Error.Message)
	}
	return r.Reply, nil
}
