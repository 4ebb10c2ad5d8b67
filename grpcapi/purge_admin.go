package grpcapi

import (
	"context"
	"log/slog"

	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// PurgeStatusSource is what PurgeAdmin reads: *purge.Service.
type PurgeStatusSource interface {
	Status(ctx context.Context, dryRun bool) ([]purge.TableReport, error)
}

// PurgeAdminServer implements roomcell.v1.PurgeAdmin (operator-only: it
// shows table sizes and ages). It deletes nothing.
type PurgeAdminServer struct {
	roomcellv1.UnimplementedPurgeAdminServer
	src     PurgeStatusSource
	nodeID  string
	enabled bool
	log     *slog.Logger
}

// NewPurgeAdminServer returns the server; enabled says whether this node
// runs the purge worker (retention.enabled).
func NewPurgeAdminServer(src PurgeStatusSource, nodeID string, enabled bool, log *slog.Logger) *PurgeAdminServer {
	if log == nil {
		log = slog.Default()
	}
	return &PurgeAdminServer{src: src, nodeID: nodeID, enabled: enabled, log: log}
}

// PurgeStatus implements roomcell.v1.PurgeAdmin. A table whose store
// failed keeps its line with what is known; the call fails only when no
// table could be read at all.
func (s *PurgeAdminServer) PurgeStatus(ctx context.Context, req *roomcellv1.PurgeStatusRequest) (*roomcellv1.PurgeStatusReply, error) {
	reps, err := s.src.Status(ctx, req.GetDryRun())
	if err != nil && len(reps) == 0 {
		return nil, toStatus(ctx, s.log, err)
	}
	if err != nil {
		s.log.WarnContext(ctx, "purge status incomplete", "request_id", RequestIDFrom(ctx), "err", err)
	}
	reply := &roomcellv1.PurgeStatusReply{NodeId: s.nodeID, Enabled: s.enabled}
	for _, r := range reps {
		t := &roomcellv1.PurgeTableStatus{
			Table: r.Table, RetentionMs: r.Retention.Milliseconds(), CutoffMs: r.CutoffMs, Held: r.Held,
			RowEstimate: r.RowEstimate, OldestCreatedAtMs: r.OldestCreatedAtMs, Purgeable: r.Purgeable,
			PurgeableCapped: r.Purgeable >= persistence.MaxPurgeCount,
			LastRoundAtMs:   r.Last.AtMs, LastRoundRows: r.Last.Rows, LastRoundDone: r.Last.Done, LastRoundSkipped: r.Last.Skipped,
		}
		if r.Last.Err != nil {
			t.LastRoundError = supervise.ErrorText(r.Last.Err)
		}
		reply.Tables = append(reply.Tables, t)
	}
	return reply, nil
}
