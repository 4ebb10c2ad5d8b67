package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

type fakePurgeStatus struct {
	reps []purge.TableReport
	err  error
}

func (f fakePurgeStatus) Status(context.Context, bool) ([]purge.TableReport, error) {
	return f.reps, f.err
}

func TestPurgeAdminStatus(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	reps := []purge.TableReport{
		{Table: persistence.PurgeRoomOutbox, Retention: 72 * time.Hour, CutoffMs: 5, Held: true, RowEstimate: 10, OldestCreatedAtMs: 3,
			Purgeable: persistence.MaxPurgeCount, Last: purge.TableRound{AtMs: 9, Rows: 4, Done: true}},
		// A failed round's error reaches the operator without its secrets.
		{Table: persistence.PurgeCommandLog, Held: true, Purgeable: -1,
			Last: purge.TableRound{Err: fmt.Errorf("dial root:hunter2@tcp(db:3306)/: refused")}},
	}
	// One table failing leaves the others' lines: the call succeeds.
	s := NewPurgeAdminServer(fakePurgeStatus{reps: reps, err: errors.New("wallet_outbox: down")}, "n1", true, quiet)
	r, err := s.PurgeStatus(context.Background(), &roomcellv1.PurgeStatusRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetNodeId() != "n1" || !r.GetEnabled() || len(r.GetTables()) != 2 {
		t.Fatalf("reply %v", r)
	}
	o := r.GetTables()[0]
	if o.GetRetentionMs() != 72*3600*1000 || o.GetRowEstimate() != 10 || !o.GetPurgeableCapped() || o.GetLastRoundRows() != 4 || !o.GetLastRoundDone() {
		t.Fatalf("room_outbox line %v", o)
	}
	if e := r.GetTables()[1].GetLastRoundError(); e == "" || strings.Contains(e, "hunter2") {
		t.Fatalf("round error %q", e)
	}
	// Nothing readable at all: the store's outage, not Internal.
	s = NewPurgeAdminServer(fakePurgeStatus{err: fmt.Errorf("read: %w", persistence.ErrUnavailable)}, "n1", true, quiet)
	_, err = s.PurgeStatus(context.Background(), &roomcellv1.PurgeStatusRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("all tables down: %v, want Unavailable", err)
	}
}
