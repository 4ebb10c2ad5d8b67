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
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			break
		}
		res, err := c.Cluster.Request(identity, Kind, rc,
			cluster.WithTimeout(min(remaining, attemptMax)), cluster.WithRetryCount(1))
		if err == nil {
			return replyOf(res)
		}
		lastErr = err
		select {
		case <-ctx.Done():
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

func replyOf(res any) (*v1.CommandReply, error) {
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		return nil, fmt.Errorf("room grain answered %T", res)
	}
	if r.Error != nil {
		return nil, ErrorFromClass(r.Error.Class, r.Error.Message)
	}
	return r.Reply, nil
}
