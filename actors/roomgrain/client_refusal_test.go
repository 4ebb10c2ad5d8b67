package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/storegate"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// lapsedOwners is a table whose node's lease is not renewed.
type lapsedOwners struct{}

func (lapsedOwners) Owner(string) string      { return "" }
func (lapsedOwners) Changed() <-chan struct{} { return nil }
func (lapsedOwners) Serving() bool            { return false }

// While the node cannot reach its ownership coordinator (etcd lost
// quorum), a command is refused at once, class unavailable, with the
// retry hint; it does not retry until the caller's deadline (before, each
// call hung for its whole deadline). The client must not even try the
// cluster: there is none here.
func TestClientRefusesAtOnceWithoutCoordinator(t *testing.T) {
	c := &Client{Owners: lapsedOwners{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Execute(ctx, rcJoin("c1", "u1"))
	took := time.Since(start)
	if !errors.Is(err, errclass.Unavailable) || !errors.Is(err, ErrNoCoordinator) {
		t.Fatalf("Execute: %v, want unavailable with the coordinator refusal", err)
	}
	if took > 100*time.Millisecond {
		t.Fatalf("refused after %v; want at once", took)
	}
}

// lapsingFakeLease is a fakeLease whose node may stop serving (its renewals
// fail) while the table still grants it the room.
type lapsingFakeLease struct {
	fakeLease
	serving, granted bool
}

func (l *lapsingFakeLease) Serving() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.serving
}

func (l *lapsingFakeLease) Granted(string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.granted
}

func (l *lapsingFakeLease) lapse(serving, granted bool) {
	l.mu.Lock()
	l.ok, l.serving, l.granted = serving, serving, granted
	l.mu.Unlock()
}

// A grain whose node cannot renew its lease (etcd lost quorum) but still
// holds the grant answers every command and read at once with the
// coordinator refusal (a coded error, so a node that forwarded the request
// refuses too instead of retrying until its own lease lapses), writes
// nothing, and stays: when the lease is renewed again under the same
// epoch the same activation answers with the room as it was. A grain
// whose grant is gone as well stops, as one whose room moved.
func TestGrainRefusesAndStaysWhileItsLeaseLapses(t *testing.T) {
	base := newFixture(t)
	lease := &lapsingFakeLease{fakeLease: fakeLease{epoch: 7, ok: true}, serving: true, granted: true}
	node := base.node(&lease.fakeLease)
	node.deps.Lease = lease
	g := node.activate("app/r1")
	node.mustDo(g, rcCreate("c1", "owner"))
	node.mustDo(g, rcJoin("c2", "bob"))

	lease.lapse(false, true)
	for name, rc := range map[string]*v1.RoomCommand{"GetRoom": rcGet(), "JoinRoom": rcJoin("c3", "carol"), "LeaveRoom": rcLeave("c4", "bob")} {
		start := time.Now()
		_, err := node.do(g, rc)
		if !errors.Is(err, ErrNoCoordinator) || !errors.Is(err, errclass.Unavailable) || errclass.CodeOf(err) != errclass.CodeNoCoordinator {
			t.Fatalf("%s while the lease lapsed: %v, want the coordinator refusal (code %d)", name, err, errclass.CodeNoCoordinator)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("%s refused after %s", name, took)
		}
	}
	if n := base.logLen(); n != 2 {
		t.Fatalf("log has %d rows after the refusals, want 2", n)
	}

	lease.lapse(true, true)
	if r := node.mustDo(g, rcGet()); r.RoomSeq != 2 || !slices.Contains(r.Room.GetMembers(), "bob") {
		t.Fatalf("the same activation after the renewal answered seq %d members %v, want seq 2 with bob", r.RoomSeq, r.Room.GetMembers())
	}

	lease.lapse(false, false)
	base.sys.Root.Send(base.probe, watch{pid: g})
	if _, err := node.do(g, rcGet()); !errors.Is(err, ErrNoCoordinator) {
		t.Fatalf("GetRoom with the grant gone: %v, want the coordinator refusal", err)
	}
	if term := expect[*actor.Terminated](t, base.events, 2*time.Second); !term.Who.Equal(g) {
		t.Fatalf("terminated %v, want the grain %v", term.Who, g)
	}
}

// renewingLapsedOwners is lapsedOwners that says how often it renews.
type renewingLapsedOwners struct {
	lapsedOwners
	every time.Duration
}

func (o renewingLapsedOwners) RenewEvery() time.Duration { return o.every }

// A refusal whose end is known tells the caller when to retry
// (errclass.RetryAfterOf, sent as a google.rpc.RetryInfo): the client's
// own coordinator refusal and a grain's, which arrives from another node
// by its code only, after one lease renewal; a closed store gate's,
// after one probe. Refusals whose end nobody knows carry no hint, and a
// hint is never stacked on one already there.
func TestRefusalsCarryWhenToRetry(t *testing.T) {
	wire := func(err error) error {
		return errclass.FromWire(errclass.CodeOf(err), errclass.Name(err), err.Error())
	}
	renewing := &Client{Owners: renewingLapsedOwners{every: 750 * time.Millisecond}}
	plain := &Client{Owners: lapsedOwners{}}
	for _, tc := range []struct {
		name string
		c    *Client
		err  error
		want time.Duration // 0: no hint
	}{
		{"coordinator refusal, renewal known", renewing, ErrNoCoordinator, 750 * time.Millisecond},
		{"coordinator refusal, renewal unknown", plain, ErrNoCoordinator, RetryAfterCoordinator},
		{"coordinator refusal from another node", renewing, wire(ErrNoCoordinator), 750 * time.Millisecond},
		{"owner's refusal wrapped", renewing, fmt.Errorf("room app/r1: owner %w", wire(ErrNoCoordinator)), 750 * time.Millisecond},
		{"store gate closed", renewing, storegate.ErrDown, storegate.ProbeEvery},
		{"store gate closed on another node", plain, wire(storegate.ErrDown), storegate.ProbeEvery},
		{"hint already there", renewing, errclass.WithRetryAfter(ErrNoCoordinator, 3*time.Second), 3 * time.Second},
		{"room moved", renewing, wire(errMoved), 0},
		{"store error", renewing, fmt.Errorf("%w: append: connection refused", errclass.Unavailable), 0},
		{"rule error", renewing, wire(room.ErrSeatTaken), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.withRetryHint(tc.err)
			if !errors.Is(err, tc.err) && err.Error() != tc.err.Error() {
				t.Fatalf("the hint changed the error: %v, was %v", err, tc.err)
			}
			d, ok := errclass.RetryAfterOf(err)
			switch {
			case tc.want == 0 && ok:
				t.Fatalf("%v carries a retry hint %s; nobody knows when it ends", tc.err, d)
			case tc.want != 0 && (!ok || d != tc.want):
				t.Fatalf("%v: retry hint %s (%v), want %s", tc.err, d, ok, tc.want)
			}
		})
	}

	// The client's own refusal, as Execute returns it.
	_, err := renewing.Execute(context.Background(), rcJoin("c1", "u1"))
	if d, ok := errclass.RetryAfterOf(err); !ok || d != 750*time.Millisecond || !errors.Is(err, ErrNoCoordinator) {
		t.Fatalf("Execute without a coordinator: %v, hint %s (%v); want the refusal after one renewal (750ms)", err, d, ok)
	}
}
