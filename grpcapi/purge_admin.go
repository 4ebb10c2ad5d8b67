package grpcapi

import (
	"context"
	"log/slog"
	"sync"

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
	dbs     []PurgeDB // several room databases: each one's lines (WithRoomDBs)
	nodeID  string
	enabled bool
	log     *slog.Logger
}

// PurgeDB is one room database's retention service: Key is its key in
// the shard map. The first database's service also holds the wallet and
// notice tables.
type PurgeDB struct {
	Key    string
	Source PurgeStatusSource
}

// WithRoomDBs makes PurgeStatus list every room database's tables, each
// line with its database (room_db), instead of the one source's: dbs[0]
// is the source the server was made with plus the wallet and notice
// tables. The databases are read at once, so one that hangs costs the
// call only its own lines (marked with status_error).
func (s *PurgeAdminServer) WithRoomDBs(dbs []PurgeDB) *PurgeAdminServer {
	s.dbs = dbs
	return s
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
	if len(s.dbs) > 1 {
		return s.purgeStatusDBs(ctx, req.GetDryRun())
	}
	reps, err := s.src.Status(ctx, req.GetDryRun())
	if err != nil && len(reps) == 0 {
		return nil, toStatus(ctx, s.log, err)
	}
	if err != nil {
		s.log.WarnContext(ctx, "purge status incomplete", "request_id", RequestIDFrom(ctx), "err", err)
	}
	reply := &roomcellv1.PurgeStatusReply{NodeId: s.nodeID, Enabled: s.enabled}
	for _, r := range reps {
		reply.Tables = append(reply.Tables, tableStatus(r))
	}
	return reply, nil
}

// purgeStatusDBs is PurgeStatus over several room databases: every
// database's room tables, labelled, then the wallet and notice tables
// (held by the first database's service only). A table another
// database's service also holds is a room table.
func (s *PurgeAdminServer) purgeStatusDBs(ctx context.Context, dryRun bool) (*roomcellv1.PurgeStatusReply, error) {
	type result struct {
		reps []purge.TableReport
		err  error
	}
	res := make([]result, len(s.dbs))
	var wg sync.WaitGroup
	for i, db := range s.dbs {
		wg.Go(func() {
			reps, err := db.Source.Status(ctx, dryRun)
			res[i] = result{reps, err}
		})
	}
	wg.Wait()
	roomTables := map[string]bool{}
	for _, r := range res[1:] {
		for _, rep := range r.reps {
			if rep.Held {
				roomTables[rep.Table] = true
			}
		}
	}
	reply := &roomcellv1.PurgeStatusReply{NodeId: s.nodeID, Enabled: s.enabled}
	var others []*roomcellv1.PurgeTableStatus
	answered := false
	for i, r := range res {
		if r.err != nil {
			s.log.WarnContext(ctx, "purge status incomplete", "request_id", RequestIDFrom(ctx), "room_db", s.dbs[i].Key, "err", r.err)
		}
		answered = answered || r.err == nil || len(r.reps) > 0
		for _, rep := range r.reps {
			if !rep.Held && i > 0 {
				continue // the first database's service lists it
			}
			t := tableStatus(rep)
			if r.err != nil && rep.Held {
				t.StatusError = supervise.ErrorText(r.err)
			}
			if !roomTables[rep.Table] {
				if i == 0 {
					others = append(others, t)
				}
				continue
			}
			t.RoomDb = s.dbs[i].Key
			reply.Tables = append(reply.Tables, t)
		}
	}
	if !answered {
		return nil, toStatus(ctx, s.log, res[0].err)
	}
	reply.Tables = append(reply.Tables, others...)
	return reply, nil
}

// tableStatus is one report's line.
func tableStatus(r purge.TableReport) *roomcellv1.PurgeTableStatus {
	t := &roomcellv1.PurgeTableStatus{
		Table: r.Table, RetentionMs: r.Retention.Milliseconds(), CutoffMs: r.CutoffMs, Held: r.Held,
		RowEstimate: r.RowEstimate, OldestCreatedAtMs: r.OldestCreatedAtMs, Purgeable: r.Purgeable,
		PurgeableCapped: r.Purgeable >= persistence.MaxPurgeCount,
		LastRoundAtMs:   r.Last.AtMs, LastRoundRows: r.Last.Rows, LastRoundDone: r.Last.Done, LastRoundSkipped: r.Last.Skipped,
	}
	if r.Last.Err != nil {
		t.LastRoundError = supervise.ErrorText(r.Last.Err)
	}
	return t
}
