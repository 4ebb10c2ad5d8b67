package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Outbox list limits: an operator query must stay bounded.
const (
	defaultOutboxLimit = 50
	maxOutboxLimit     = 1000
	// maxFailedScan bounds the pending rows read to find failed ones
	// (retry_count > 0): the store filters by status only.
	maxFailedScan = 10000
	maxEventIDLen = 128
)

// OutboxAdminServer implements roomcell.v1.OutboxAdmin over the outbox
// store. It reads rows and releases leases; it never edits an envelope and
// never marks a row published (that is the relay's job).
type OutboxAdminServer struct {
	roomcellv1.UnimplementedOutboxAdminServer
	store persistence.OutboxStore
	kick  func(eventID string) bool
	clock func() time.Time
	log   *slog.Logger
}

// NewOutboxAdminServer returns the server. kick asks this process's relay
// for a batch now with the event forced past its backoff and reports
// whether a relay was there to ask; wire it to
// func(id string) bool { r.Kick(); return true } with the poller
// relay.Start returned, or pass nil when the process runs no relay.
func NewOutboxAdminServer(store persistence.OutboxStore, kick func(eventID string) bool, log *slog.Logger) *OutboxAdminServer {
	if log == nil {
		log = slog.Default()
	}
	return &OutboxAdminServer{store: store, kick: kick, clock: time.Now, log: log}
}

// ListOutbox implements roomcell.v1.OutboxAdmin.
func (s *OutboxAdminServer) ListOutbox(ctx context.Context, req *roomcellv1.ListOutboxRequest) (*roomcellv1.ListOutboxReply, error) {
	reply, err := s.listOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) listOutbox(ctx context.Context, req *roomcellv1.ListOutboxRequest) (*roomcellv1.ListOutboxReply, error) {
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, errclass.Errorf(errclass.Invalid, "limit must not be negative")
	case limit == 0:
		limit = defaultOutboxLimit
	case limit > maxOutboxLimit:
		limit = maxOutboxLimit
	}
	filter := persistence.OutboxFilter{Limit: limit}
	failedOnly := false
	switch req.GetStatus() {
	case "", "all":
	case persistence.OutboxPending, persistence.OutboxPublished, persistence.OutboxParked, persistence.OutboxSkipped:
		filter.Status = req.GetStatus()
	case "failed":
		filter.Status, filter.Limit, failedOnly = persistence.OutboxPending, maxFailedScan, true
	default:
		return nil, errclass.Errorf(errclass.Invalid, "status %q: want all, pending, parked, skipped, published or failed", req.GetStatus())
	}
	rows, err := s.store.ListOutbox(ctx, filter)
	if err != nil {
		return nil, err
	}
	reply := &roomcellv1.ListOutboxReply{}
	if failedOnly {
		reply.Truncated = len(rows) >= maxFailedScan
	}
	for _, r := range rows {
		if failedOnly && r.RetryCount == 0 {
			continue
		}
		if len(reply.Entries) == limit {
			break
		}
		reply.Entries = append(reply.Entries, outboxEntry(r))
	}
	st, err := s.store.OutboxStats(ctx)
	if err != nil {
		return nil, err
	}
	reply.PendingTotal, reply.OldestPendingCreatedAtMs = st.Pending, st.OldestCreatedAtMs
	return reply, nil
}

// GetOutbox implements roomcell.v1.OutboxAdmin.
func (s *OutboxAdminServer) GetOutbox(ctx context.Context, req *roomcellv1.GetOutboxRequest) (*roomcellv1.GetOutboxReply, error) {
	reply, err := s.getOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) getOutbox(ctx context.Context, req *roomcellv1.GetOutboxRequest) (*roomcellv1.GetOutboxReply, error) {
	if err := checkEventID(req.GetEventId()); err != nil {
		return nil, err
	}
	row, err := s.store.GetOutbox(ctx, req.GetEventId())
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(row.Envelope)
	if err != nil {
		// The payload is raw JSON from the store; if it is not JSON the
		// operator still needs to see it.
		env, _ = json.Marshal(struct {
			persistence.Envelope
			Payload string `json:"payload"`
		}{row.Envelope, string(row.Envelope.Payload)})
	}
	return &roomcellv1.GetOutboxReply{Entry: outboxEntry(row), EnvelopeJson: string(env)}, nil
}

// RetryOutbox implements roomcell.v1.OutboxAdmin: requeue. A parked row
// goes back to pending; any pending row becomes due at once. A live lease
// is kept: clearing it under a sender in flight would give the room a
// second sender.
func (s *OutboxAdminServer) RetryOutbox(ctx context.Context, req *roomcellv1.RetryOutboxRequest) (*roomcellv1.RetryOutboxReply, error) {
	reply, err := s.retryOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) retryOutbox(ctx context.Context, req *roomcellv1.RetryOutboxRequest) (*roomcellv1.RetryOutboxReply, error) {
	id := req.GetEventId()
	if err := checkEventID(id); err != nil {
		return nil, err
	}
	row, err := s.store.GetOutbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Status == persistence.OutboxPublished || row.Status == persistence.OutboxSkipped {
		return nil, errclass.Errorf(errclass.Precondition, "event %s is already %s", id, row.Status)
	}
	if err := s.store.RequeueOutbox(ctx, id, time.Now().UnixMilli()); err != nil {
		return nil, err
	}
	if row, err = s.store.GetOutbox(ctx, id); err != nil {
		return nil, err
	}
	notified := s.kick != nil && s.kick(id)
	s.log.InfoContext(ctx, "outbox requeue requested", "worker", "room_outbox", "event_id", id,
		"retry_count", row.RetryCount, "relay_notified", notified, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.RetryOutboxReply{Entry: outboxEntry(row), RelayNotified: notified}, nil
}

// maxSkipText bounds an operator's reason and name.
const maxSkipText = 512

// SkipOutbox implements roomcell.v1.OutboxAdmin.
func (s *OutboxAdminServer) SkipOutbox(ctx context.Context, req *roomcellv1.SkipOutboxRequest) (*roomcellv1.SkipOutboxReply, error) {
	reply, err := s.skipOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) skipOutbox(ctx context.Context, req *roomcellv1.SkipOutboxRequest) (*roomcellv1.SkipOutboxReply, error) {
	id, reason, who := req.GetEventId(), strings.TrimSpace(req.GetReason()), strings.TrimSpace(req.GetOperator())
	if err := checkEventID(id); err != nil {
		return nil, err
	}
	if err := checkSkipText(reason, who); err != nil {
		return nil, err
	}
	row, err := s.store.GetOutbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Status == persistence.OutboxPublished {
		return nil, errclass.Errorf(errclass.Precondition, "event %s is already published", id)
	}
	if err := s.store.SkipOutbox(ctx, id, who, reason, time.Now().UnixMilli()); err != nil {
		return nil, err
	}
	if row, err = s.store.GetOutbox(ctx, id); err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "outbox event skipped by an operator: it will not be sent", "worker", "room_outbox", "event_id", id,
		"event_type", row.Envelope.EventType, "room_id", row.Envelope.RoomID, "operator", who, "reason", reason, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.SkipOutboxReply{Entry: outboxEntry(row)}, nil
}

// checkSkipText checks an operator's skip reason and name.
func checkSkipText(reason, who string) error {
	switch {
	case reason == "" || who == "":
		return errclass.Errorf(errclass.Invalid, "reason and operator are required: a skipped event is recorded with who and why")
	case len(reason) > maxSkipText || len(who) > 128:
		return errclass.Errorf(errclass.Invalid, "reason (at most %d bytes) or operator (at most 128) too long", maxSkipText)
	case !utf8.ValidString(reason) || !utf8.ValidString(who):
		return errclass.Errorf(errclass.Invalid, "reason and operator must be UTF-8")
	}
	return nil
}

func checkEventID(id string) error {
	if id == "" {
		return errclass.Errorf(errclass.Invalid, "event_id is required")
	}
	if len(id) > maxEventIDLen {
		return errclass.Errorf(errclass.Invalid, "event_id is longer than %d bytes", maxEventIDLen)
	}
	return nil
}

// status ends every method: a missing row gets the operator's words, and
// toStatus maps every error, this package's one mapping.
func (s *OutboxAdminServer) status(ctx context.Context, err error) error {
	if errors.Is(err, persistence.ErrNotFound) {
		err = errclass.Errorf(errclass.NotFound, "no such outbox event")
	}
	return toStatus(ctx, s.log, err)
}

func outboxEntry(r persistence.OutboxRow) *roomcellv1.OutboxEntry {
	e := r.Envelope
	return &roomcellv1.OutboxEntry{
		EventId:       e.EventID,
		EventType:     e.EventType,
		AppCode:       e.AppCode,
		RoomId:        e.RoomID,
		RoomSeq:       e.RoomSeq,
		Status:        r.Status,
		RetryCount:    int32(r.RetryCount),
		LastError:     r.LastError,
		CreatedAtMs:   r.CreatedAtMs,
		UpdatedAtMs:   r.UpdatedAtMs,
		PublishedAtMs: r.PublishedAtMs,
		LockedBy:      r.LockedBy,
		LockUntilMs:   r.LockUntilMs,
		NextRetryAtMs: r.NextRetryAtMs,
		ResolvedBy:    r.ResolvedBy,
		ResolvedAtMs:  r.ResolvedAtMs,
		Resolution:    r.Resolution,
	}
}
