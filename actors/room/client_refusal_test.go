package room

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"
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
