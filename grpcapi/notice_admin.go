package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Notice list limits and key bounds: an operator query stays bounded and
// never reaches the store with a key it cannot hold.
const (
	defaultNoticeLimit = 50
	maxNoticeLimit     = 1000
	maxNoticeEventID   = 255
	maxNoticeKeyPart   = 64
)

// NoticeAdminServer implements roomcell.v1.NoticeAdmin over the notice
// store: operators list dead letters, look at one notice's delivery state
// and payload, and requeue a dead letter. It never edits a payload and
// never marks a row delivered (that is the workers' job).
type NoticeAdminServer struct {
	roomcellv1.UnimplementedNoticeAdminServer
	store persistence.NoticeStore
	kick  func(source string) bool
	clock func() time.Time
	log   *slog.Logger
}

// NewNoticeAdminServer returns the server. kick asks this process's worker
// of a source for a round now and reports whether there was one; wire it
// to (*noticeapp.Service).Kick, or pass nil when the process runs no
// notice worker.
func NewNoticeAdminServer(store persistence.NoticeStore, kick func(source string) bool, log *slog.Logger) *NoticeAdminServer {
	if log == nil {
		log = slog.Default()
	}
	return &NoticeAdminServer{store: store, kick: kick, clock: time.Now, log: log}
}

// ListNotices implements roomcell.v1.NoticeAdmin.
func (s *NoticeAdminServer) ListNotices(ctx context.Context, req *roomcellv1.ListNoticesRequest) (*roomcellv1.ListNoticesReply, error) {
	reply, err := s.listNotices(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *NoticeAdminServer) listNotices(ctx context.Context, req *roomcellv1.ListNoticesRequest) (*roomcellv1.ListNoticesReply, error) {
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, errclass.Errorf(errclass.Invalid, "limit must not be negative")
	case limit == 0:
		limit = defaultNoticeLimit
	case limit > maxNoticeLimit:
		limit = maxNoticeLimit
	}
	f := persistence.NoticeFilter{Limit: limit, SourceName: req.GetSourceName()}
	switch st := req.GetStatus(); {
	case st == "" || st == "all":
	case persistence.ValidNoticeStatus(st):
		f.Status = st
	default:
		return nil, errclass.Errorf(errclass.Invalid, "status %q: want all, delivering, retryable, delivered, failed or skipped", st)
	}
	if len(f.SourceName) > maxNoticeKeyPart {
		return nil, errclass.Errorf(errclass.Invalid, "source_name is longer than %d bytes", maxNoticeKeyPart)
	}
	rows, err := s.store.List(ctx, f)
	if err != nil {
		return nil, err
	}
	reply := &roomcellv1.ListNoticesReply{}
	for _, d := range rows {
		reply.Entries = append(reply.Entries, noticeEntry(d, false))
	}
	return reply, nil
}

// matching returns the rows of key's source event that agree with the
// key's other fields (empty ones match anything).
func (s *NoticeAdminServer) matching(ctx context.Context, key *roomcellv1.NoticeKey) ([]persistence.NoticeDelivery, error) {
	id := key.GetSourceEventId()
	if id == "" {
		return nil, errclass.Errorf(errclass.Invalid, "key.source_event_id is required")
	}
	if len(id) > maxNoticeEventID {
		return nil, errclass.Errorf(errclass.Invalid, "key.source_event_id is longer than %d bytes", maxNoticeEventID)
	}
	for field, v := range map[string]string{"source_name": key.GetSourceName(), "app_code": key.GetAppCode(), "channel": key.GetChannel()} {
		if len(v) > maxNoticeKeyPart {
			return nil, errclass.Errorf(errclass.Invalid, "key.%s is longer than %d bytes", field, maxNoticeKeyPart)
		}
	}
	rows, err := s.store.FindBySourceEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []persistence.NoticeDelivery
	for _, d := range rows {
		if (key.GetSourceName() == "" || key.GetSourceName() == d.SourceName) && (key.GetAppCode() == "" || key.GetAppCode() == d.AppCode) &&
			(key.GetChannel() == "" || key.GetChannel() == d.Channel) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, errclass.Errorf(errclass.NotFound, "no notice for source event %s", id)
	}
	return out, nil
}

// GetNotice implements roomcell.v1.NoticeAdmin.
func (s *NoticeAdminServer) GetNotice(ctx context.Context, req *roomcellv1.GetNoticeRequest) (*roomcellv1.GetNoticeReply, error) {
	reply, err := s.getNotice(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *NoticeAdminServer) getNotice(ctx context.Context, req *roomcellv1.GetNoticeRequest) (*roomcellv1.GetNoticeReply, error) {
	rows, err := s.matching(ctx, req.GetKey())
	if err != nil {
		return nil, err
	}
	reply := &roomcellv1.GetNoticeReply{}
	for _, d := range rows {
		reply.Entries = append(reply.Entries, noticeEntry(d, true))
	}
	return reply, nil
}

// RequeueNotice implements roomcell.v1.NoticeAdmin. The requeue resets
// retry_count to 0, so the row gets a full new set of attempts (a requeue
// usually follows a fix of what made it fail); requeue_count and
// requeued_at_ms keep the history, and last_error stays until the next
// attempt.
func (s *NoticeAdminServer) RequeueNotice(ctx context.Context, req *roomcellv1.RequeueNoticeRequest) (*roomcellv1.RequeueNoticeReply, error) {
	reply, err := s.requeueNotice(ctx, req)
	return reply, s.status(ctx, err)
}

func (s *NoticeAdminServer) requeueNotice(ctx context.Context, req *roomcellv1.RequeueNoticeRequest) (*roomcellv1.RequeueNoticeReply, error) {
	rows, err := s.matching(ctx, req.GetKey())
	if err != nil {
		return nil, err
	}
	var failed []persistence.NoticeDelivery
	for _, d := range rows {
		if d.Status == persistence.NoticeFailed {
			failed = append(failed, d)
		}
	}
	switch {
	case len(failed) == 0:
		return nil, errclass.Errorf(errclass.Precondition, "notice %s is %s, not failed: only dead letters are requeued", rows[0].NoticeKey, rows[0].Status)
	case len(failed) > 1:
		return nil, errclass.Errorf(errclass.Invalid, "%d failed notices have source event %s: give source_name, app_code and channel", len(failed), req.GetKey().GetSourceEventId())
	}
	d, err := s.store.Requeue(ctx, failed[0].NoticeKey, s.clock().UnixMilli())
	if err != nil {
		return nil, err
	}
	notified := s.kick != nil && s.kick(d.SourceName)
	s.log.InfoContext(ctx, "notice requeued", "source_name", d.SourceName, "app_code", d.AppCode, "source_event_id", d.SourceEventID,
		"channel", d.Channel, "requeue_count", d.RequeueCount, "worker_notified", notified, "request_id", RequestIDFrom(ctx))
	return &roomcellv1.RequeueNoticeReply{Entry: noticeEntry(d, false), WorkerNotified: notified}, nil
}

// status ends every method: store classes get the operator's words (a
// requeue that lost its race is a precondition: the row is no longer
// failed), and toStatus maps every error, this package's one mapping.
func (s *NoticeAdminServer) status(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		err = errclass.Errorf(errclass.NotFound, "no such notice")
	case errors.Is(err, persistence.ErrConflict):
		err = errclass.Errorf(errclass.Precondition, "the notice changed meanwhile (it is no longer failed)")
	}
	return toStatus(ctx, s.log, err)
}

func noticeEntry(d persistence.NoticeDelivery, withPayload bool) *roomcellv1.NoticeEntry {
	e := &roomcellv1.NoticeEntry{
		SourceName: d.SourceName, AppCode: d.AppCode, SourceEventId: d.SourceEventID, Channel: d.Channel,
		EventType: d.EventType, UserId: d.UserID, Ext: d.Ext, Status: d.Status, RetryCount: int32(d.RetryCount),
		NextRetryAtMs: d.NextRetryAtMs, LockedBy: d.LockedBy, LockUntilMs: d.LockUntilMs, LastError: d.LastError,
		Ingress: d.Ingress, SourceCreatedAtMs: d.SourceCreatedAtMs, CreatedAtMs: d.CreatedAtMs, UpdatedAtMs: d.UpdatedAtMs,
		DeliveredAtMs: d.DeliveredAtMs, RequeueCount: int32(d.RequeueCount), RequeuedAtMs: d.RequeuedAtMs,
	}
	if withPayload {
		e.PayloadJson = string(d.Payload)
	}
	return e
}
