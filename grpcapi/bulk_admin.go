package grpcapi

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// maxFilterText bounds a selector's text fields (ids, error text): the
// store's columns are no longer.
const maxFilterText = 255

// checkFilterText refuses a selector field the store could never match.
func checkFilterText(field, v string) error {
	switch {
	case len(v) > maxFilterText:
		return errclass.Errorf(errclass.Invalid, "%s is longer than %d bytes", field, maxFilterText)
	case !utf8.ValidString(v):
		return errclass.Errorf(errclass.Invalid, "%s must be UTF-8", field)
	}
	return nil
}

// checkRange refuses a negative bound, a negative limit and an empty
// time range.
func checkRange(from, to int64, limit int32) error {
	switch {
	case from < 0 || to < 0:
		return errclass.Errorf(errclass.Invalid, "created_from_ms and created_to_ms must not be negative")
	case from != 0 && to != 0 && to <= from:
		return errclass.Errorf(errclass.Invalid, "created_to_ms (%d) must be after created_from_ms (%d)", to, from)
	case limit < 0:
		return errclass.Errorf(errclass.Invalid, "limit must not be negative")
	}
	return nil
}

// outboxSelector checks sel and converts it for the store.
func outboxSelector(sel *roomcellv1.OutboxSelector) (persistence.OutboxSelector, error) {
	out := persistence.OutboxSelector{
		Status: sel.GetStatus(), AppCode: sel.GetAppCode(), RoomID: sel.GetRoomId(),
		CreatedFromMs: sel.GetCreatedFromMs(), CreatedToMs: sel.GetCreatedToMs(),
		ErrorContains: sel.GetErrorContains(), Limit: int(sel.GetLimit()),
	}
	switch out.Status {
	case "", persistence.OutboxParked, persistence.OutboxPending:
	default:
		return out, errclass.Errorf(errclass.Invalid, "selector.status %q: want parked, pending or empty for both (published and skipped rows are done)", out.Status)
	}
	if out.RoomID != "" && out.AppCode == "" {
		return out, errclass.Errorf(errclass.Invalid, "selector.room_id needs selector.app_code: room ids are unique within an app only")
	}
	for field, v := range map[string]string{"selector.app_code": out.AppCode, "selector.room_id": out.RoomID, "selector.error_contains": out.ErrorContains} {
		if err := checkFilterText(field, v); err != nil {
			return out, err
		}
	}
	return out, checkRange(out.CreatedFromMs, out.CreatedToMs, sel.GetLimit())
}

// BulkRequeueOutbox implements roomcell.v1.OutboxAdmin.
func (s *OutboxAdminServer) BulkRequeueOutbox(ctx context.Context, req *roomcellv1.BulkRequeueOutboxRequest) (*roomcellv1.BulkOutboxReply, error) {
	reply, err := s.bulkRequeueOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) bulkRequeueOutbox(ctx context.Context, req *roomcellv1.BulkRequeueOutboxRequest) (*roomcellv1.BulkOutboxReply, error) {
	sel, err := outboxSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	now := s.clock().UnixMilli()
	if req.GetDryRun() {
		n, err := s.store.CountRequeueOutbox(ctx, sel, now)
		return &roomcellv1.BulkOutboxReply{Count: int64(n), DryRun: true}, err
	}
	n, err := s.store.BulkRequeueOutbox(ctx, sel, now)
	if err != nil {
		return nil, err
	}
	notified := n > 0 && s.kick != nil && s.kick("")
	s.log.InfoContext(ctx, "outbox bulk requeue", "worker", "room_outbox", "count", n, "selector", sel,
		"relay_notified", notified, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.BulkOutboxReply{Count: int64(n), RelayNotified: notified}, nil
}

// BulkSkipOutbox implements roomcell.v1.OutboxAdmin.
func (s *OutboxAdminServer) BulkSkipOutbox(ctx context.Context, req *roomcellv1.BulkSkipOutboxRequest) (*roomcellv1.BulkOutboxReply, error) {
	reply, err := s.bulkSkipOutbox(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *OutboxAdminServer) bulkSkipOutbox(ctx context.Context, req *roomcellv1.BulkSkipOutboxRequest) (*roomcellv1.BulkOutboxReply, error) {
	sel, err := outboxSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	if sel == (persistence.OutboxSelector{}) {
		return nil, errclass.Errorf(errclass.Invalid, "a bulk skip needs a selector (status, app, room, time range, error or limit): skipping the whole backlog is refused")
	}
	reason, who := strings.TrimSpace(req.GetReason()), strings.TrimSpace(req.GetOperator())
	if err := checkSkipText(reason, who); err != nil {
		return nil, err
	}
	if req.GetDryRun() {
		n, err := s.store.CountSkipOutbox(ctx, sel)
		return &roomcellv1.BulkOutboxReply{Count: int64(n), DryRun: true}, err
	}
	n, err := s.store.BulkSkipOutbox(ctx, sel, who, reason, s.clock().UnixMilli())
	if err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "outbox events skipped in bulk by an operator: they will not be sent", "worker", "room_outbox",
		"count", n, "selector", sel, "operator", who, "reason", reason, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.BulkOutboxReply{Count: int64(n)}, nil
}

// BulkRequeueNotices implements roomcell.v1.NoticeAdmin.
func (s *NoticeAdminServer) BulkRequeueNotices(ctx context.Context, req *roomcellv1.BulkRequeueNoticesRequest) (*roomcellv1.BulkRequeueNoticesReply, error) {
	reply, err := s.bulkRequeueNotices(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *NoticeAdminServer) bulkRequeueNotices(ctx context.Context, req *roomcellv1.BulkRequeueNoticesRequest) (*roomcellv1.BulkRequeueNoticesReply, error) {
	sel, err := noticeSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	if req.GetDryRun() {
		n, err := s.store.CountRequeue(ctx, sel)
		return &roomcellv1.BulkRequeueNoticesReply{Count: int64(n), DryRun: true}, err
	}
	n, err := s.store.BulkRequeue(ctx, sel, s.clock().UnixMilli())
	if err != nil {
		return nil, err
	}
	notified := false
	if n > 0 && s.kick != nil {
		sources := []string{sel.SourceName}
		if sel.SourceName == "" {
			sources = []string{persistence.SourceWalletOutbox, persistence.SourceRoomOutbox}
		}
		for _, src := range sources {
			notified = s.kick(src) || notified
		}
	}
	s.log.InfoContext(ctx, "notices requeued in bulk", "count", n, "selector", sel, "worker_notified", notified, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.BulkRequeueNoticesReply{Count: int64(n), WorkerNotified: notified}, nil
}

// BulkSkipNotices implements roomcell.v1.NoticeAdmin.
func (s *NoticeAdminServer) BulkSkipNotices(ctx context.Context, req *roomcellv1.BulkSkipNoticesRequest) (*roomcellv1.BulkRequeueNoticesReply, error) {
	reply, err := s.bulkSkipNotices(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *NoticeAdminServer) bulkSkipNotices(ctx context.Context, req *roomcellv1.BulkSkipNoticesRequest) (*roomcellv1.BulkRequeueNoticesReply, error) {
	sel, err := noticeSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	if sel == (persistence.NoticeSelector{}) {
		return nil, errclass.Errorf(errclass.Invalid, "a bulk skip needs a selector (source, app, user, event type, time range, error or limit): skipping every dead letter is refused")
	}
	reason, who := strings.TrimSpace(req.GetReason()), strings.TrimSpace(req.GetOperator())
	if err := checkSkipText(reason, who); err != nil {
		return nil, err
	}
	if req.GetDryRun() {
		n, err := s.store.CountRequeue(ctx, sel)
		return &roomcellv1.BulkRequeueNoticesReply{Count: int64(n), DryRun: true}, err
	}
	n, err := s.store.BulkSkip(ctx, sel, who, reason, s.clock().UnixMilli())
	if err != nil {
		return nil, err
	}
	s.log.WarnContext(ctx, "dead letters skipped in bulk by an operator: they will not be sent", "count", n, "selector", sel,
		"operator", who, "reason", reason, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.BulkRequeueNoticesReply{Count: int64(n)}, nil
}

// noticeSelector checks r and converts it for the store.
func noticeSelector(r *roomcellv1.NoticeSelector) (persistence.NoticeSelector, error) {
	sel := persistence.NoticeSelector{
		SourceName: r.GetSourceName(), AppCode: r.GetAppCode(), UserID: r.GetUserId(), EventType: r.GetEventType(),
		CreatedFromMs: r.GetCreatedFromMs(), CreatedToMs: r.GetCreatedToMs(), ErrorContains: r.GetErrorContains(), Limit: int(r.GetLimit()),
	}
	for field, v := range map[string]string{"selector.source_name": sel.SourceName, "selector.app_code": sel.AppCode,
		"selector.user_id": sel.UserID, "selector.event_type": sel.EventType, "selector.error_contains": sel.ErrorContains} {
		if err := checkFilterText(field, v); err != nil {
			return sel, err
		}
	}
	return sel, checkRange(sel.CreatedFromMs, sel.CreatedToMs, r.GetLimit())
}
