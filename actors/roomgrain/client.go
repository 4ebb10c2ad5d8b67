package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/storegate"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
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

	repliesOnce sync.Once
	replies     *replies // localcall.go
}

// Owners is the part of the ownership table the client follows.
type Owners interface {
	Owner(identity string) string
	Changed() <-chan struct{}
}

// servingOwners is an Owners that knows whether its node's ownership lease
// is renewed (ownership.Etcd). While it is not (etcd lost quorum, or the
// node is cut off from it), no grain of this node answers and the table
// may be stale: the client refuses at once, class unavailable, instead of
// retrying until the caller's deadline.
type servingOwners interface {
	Serving() bool
}

// RetryAfterCoordinator is the retry hint of a refusal while the node
// cannot reach its ownership coordinator, when Owners does not say how
// often it renews its lease (renewingOwners).
const RetryAfterCoordinator = time.Second

// renewingOwners is an Owners that says how often it renews its lease
// (ownership.Etcd): a node that lost its coordinator serves again at
// the first renewal that gets through, so that is when a retry can
// first succeed.
type renewingOwners interface {
	RenewEvery() time.Duration
}

// ErrNoCoordinator is the refusal while the node's ownership lease is not
// renewed (errors.Is(err, errclass.Unavailable) holds as well). A grain
// whose node is in that state answers it too, so a node that still
// serves but forwards to an owner that does not refuses at once instead
// of retrying until its own lease lapses. The client's refusal says when
// to retry (errclass.RetryAfterOf: one lease renewal).
var ErrNoCoordinator = errclass.New(errclass.CodeNoCoordinator)

// refuse reports the fast refusal when the node has lost its coordinator.
func (c *Client) refuse(identity string) error {
	if s, ok := c.Owners.(servingOwners); ok && !s.Serving() {
		return c.withRetryHint(fmt.Errorf("room %s: %w", identity, ErrNoCoordinator))
	}
	return nil
}

// withRetryHint adds to a refusal whose end is known when a retry may
// succeed (the gRPC layer sends it as a google.rpc.RetryInfo): a node
// without its coordinator serves again at its next lease renewal at the
// earliest, a closed store gate opens at its next probe. A refusal that
// came from another node's grain arrives by its code, without the hint,
// and gets it here.
func (c *Client) withRetryHint(err error) error {
	if _, ok := errclass.RetryAfterOf(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ErrNoCoordinator):
		d := RetryAfterCoordinator
		if r, ok := c.Owners.(renewingOwners); ok && r.RenewEvery() > 0 {
			d = r.RenewEvery()
		}
		return errclass.WithRetryAfter(err, d)
	case errors.Is(err, storegate.ErrDown):
		return errclass.WithRetryAfter(err, storegate.ProbeEvery)
	case errors.Is(err, room.ErrRateLimited):
		// A grain's password-guess bucket (password.go) sends its exact
		// wait (RoomError.retry_after_ms); one that did not (an older
		// node) gives a try back every interval, so one is always enough.
		return errclass.WithRetryAfter(err, room.PasswordGuessEvery)
	}
	return err
}

// Execute runs one command in its room grain. A retried attempt is safe:
// commands are idempotent by command_id.
func (c *Client) Execute(ctx context.Context, rc *v1.RoomCommand) (reply *v1.CommandReply, err error) {
	return c.ExecuteWithin(ctx, rc, 0)
}

// ExecuteWithin is Execute bounded by within as well as by ctx (when
// positive): the caller's command timeout without a context and timer
// of its own per call (grpcapi's command timeout).
func (c *Client) ExecuteWithin(ctx context.Context, rc *v1.RoomCommand, within time.Duration) (reply *v1.CommandReply, err error) {
	app, roomID := room.KeyOf(rc)
	identity, err := roomIdentity(app, roomID)
	if err != nil {
		return nil, err
	}
	ctx, end := commandSpan(ctx, rc) // tracing.go
	defer func() { end(err) }()
	err = c.call(ctx, identity, rc, within, func(res any) (err error) {
		reply, err = replyOf(res)
		return err
	})
	return reply, err
}

// Identity is the grain identity of a room, its ids checked.
func Identity(app, roomID string) (string, error) { return roomIdentity(app, roomID) }

// roomIdentity is the grain identity of a room, its ids checked.
func roomIdentity(app, roomID string) (string, error) {
	if err := room.CheckID("app_code", app); err != nil {
		return "", err
	}
	if err := room.CheckID("room_id", roomID); err != nil {
		return "", err
	}
	return app + "/" + roomID, nil
}

// Call sends msg to the room's grain (identity, from Identity) until
// answer accepts an answer or the deadline passes, as Execute does: for
// the messages an observer of the room owns (observer.go's Receiver).
// answer returns ErrorOf's error for a refusal.
func (c *Client) Call(ctx context.Context, identity string, msg any, answer func(res any) error) error {
	return c.call(ctx, identity, msg, 0, answer)
}

// call sends msg to the room's grain until answer accepts an answer or
// the deadline (ctx's, or within from now when that comes first) passes;
// answer returns errMoved for an answer of a grain whose node lost the
// room.
func (c *Client) call(ctx context.Context, identity string, msg any, within time.Duration, answer func(res any) error) error {
	attemptMax := c.AttemptTimeout
	if attemptMax <= 0 {
		attemptMax = 3 * time.Second
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	if within > 0 {
		if d := time.Now().Add(within); d.Before(deadline) {
			deadline = d
		}
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
		if err := c.refuse(identity); err != nil {
			return err
		}
		res, err := c.attempt(ctx, identity, msg, min(remaining, attemptMax))
		if err == nil {
			err := answer(res)
			if errors.Is(err, ErrNoCoordinator) {
				// The owner lost its coordinator: nothing answers for the
				// room until it is back or the shard moves. Its grain
				// stays (and stays cached here) while it keeps the grant.
				return c.withRetryHint(fmt.Errorf("room %s: owner %w", identity, err))
			}
			if !errors.Is(err, errMoved) {
				return c.withRetryHint(err)
			}
			// A grain whose node lost the room: it has stopped; ask the
			// owner again (not the cached grain).
			c.Cluster.PidCache.Remove(identity, Kind)
		}
		lastErr = err
		if errors.Is(err, ErrNoCoordinator) {
			return c.withRetryHint(err)
		}
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
		return ctx.Err()
	}
	if lastErr == nil {
		lastErr = context.DeadlineExceeded
	}
	return fmt.Errorf("%w: room %s did not answer in time: %v", errclass.Unavailable, identity, lastErr)
}

// errOwnerChanged: the room changed owner during the attempt.
var errOwnerChanged = errors.New("room changed owner during the request")

// attempt is one request to the room's grain, abandoned early when the
// room's owner changes meanwhile (with Owners set) or ctx ends. A grain
// of this node (localPid) answers a first page of GetRoom from the view
// it published (view.go), else is sent the message directly, its answer
// awaited on a channel (localcall.go); any other goes through
// cluster.Request, which finds or activates it.
func (c *Client) attempt(ctx context.Context, identity string, msg any, timeout time.Duration) (any, error) {
	var changed <-chan struct{} // nil (never ready) without Owners
	var owner string
	if c.Owners != nil {
		changed = c.Owners.Changed()
		owner = c.Owners.Owner(identity)
		// A grain cached on a node that no longer owns the room (it died or
		// gave the room up) would cost this attempt a dead letter or a
		// timeout: ask the owner instead.
		if pid, ok := c.Cluster.PidCache.Get(identity, Kind); ok && owner != "" && pid.Address != owner {
			c.Cluster.PidCache.Remove(identity, Kind)
		}
	}
	call := func() (any, error) {
		return c.Cluster.Request(identity, Kind, msg, cluster.WithTimeout(timeout), cluster.WithRetryCount(1))
	}
	var done <-chan any
	var expire <-chan time.Time
	var local uint32 // the request id of a local request
	if pid := c.localPid(identity); pid != nil {
		if resp, ok := c.readView(pid, msg); ok {
			return resp, nil // the room's published answer (view.go)
		}
		done, local = c.sendLocal(pid, msg)
		defer func() {
			if local != 0 {
				c.replies.forget(local) // given up on: its answer, if it comes, is dropped
			}
		}()
		// The attempt's bound, unless ctx's own deadline comes first: no
		// timer per call then.
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expire = t.C
		}
	} else if c.Owners == nil {
		return call()
	} else {
		ch := make(chan any, 1)
		go func() {
			res, err := call()
			if err != nil {
				ch <- attemptErr{err}
				return
			}
			ch <- res
		}()
		done = ch
	}
	// While the node's lease lapses mid-attempt, no answer is coming from
	// its grains: look every 100 ms and give up then, not at the timeout.
	var check <-chan time.Time
	if _, ok := c.Owners.(servingOwners); ok {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		check = t.C
	}
	for {
		select {
		case res := <-done:
			local = 0
			if e, ok := res.(attemptErr); ok {
				if errors.Is(e.err, actor.ErrDeadLetter) {
					c.Cluster.PidCache.Remove(identity, Kind) // as cluster.Request does
				}
				return nil, e.err
			}
			return res, nil
		case <-expire:
			c.Cluster.PidCache.Remove(identity, Kind) // as cluster.Request does on a timeout
			return nil, actor.ErrTimeout
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-check:
			if err := c.refuse(identity); err != nil {
				return nil, err
			}
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
		return nil, errorOf(r.Error)
	}
	return r.Reply, nil
}

// ErrorOf rebuilds an error a grain answered (WireError made it).
func ErrorOf(e *v1.RoomError) error { return errorOf(e) }

// WireError is err as the grain answers it (ErrorOf rebuilds it).
func WireError(err error) *v1.RoomError { return roomError(err) }

// errorOf rebuilds a grain's error; errMoved comes back as itself.
func errorOf(e *v1.RoomError) error {
	err := errclass.FromWire(errclass.Code(e.Code), e.Class, e.Message)
	if len(e.Metadata) > 0 {
		err = errclass.WithMeta(err, e.Metadata)
	}
	if e.RetryAfterMs > 0 {
		err = errclass.WithRetryAfter(err, time.Duration(e.RetryAfterMs)*time.Millisecond)
	}
	return err
}

// roomError is err as it crosses to another member (errorOf rebuilds it):
// its facts, the room database it is of among them, as metadata.
func roomError(err error) *v1.RoomError {
	meta := errclass.MetaOf(err)
	if key, ok := persistence.RoomDBOf(err); ok {
		meta = maps.Clone(meta)
		if meta == nil {
			meta = map[string]string{}
		}
		meta[persistence.RoomDBMetaKey] = key
	}
	re := &v1.RoomError{Class: errclass.Name(err), Message: err.Error(), Code: uint32(errclass.CodeOf(err)), Metadata: meta}
	if d, ok := errclass.RetryAfterOf(err); ok && d > 0 {
		// Rounded up: a hint a millisecond early would be refused again.
		re.RetryAfterMs = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	return re
}
