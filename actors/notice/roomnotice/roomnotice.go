package roomnotice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// WorkerName is the worker's actor name, log `worker` field and metrics
// label.
const WorkerName = "room_notice_worker"

// ExtRoomNotice is the Ext of the C2C TIMCustomElem (seed 003).
const ExtRoomNotice = "room_notice"

// DefaultSettle is how far behind its position the scanner rereads
// room_outbox for kicks that committed late: created_at_ms is stamped by
// the grain before the append, and the append commits within
// mysql.query_timeout (group commit included); 30 s leaves room for clock
// skew between the room nodes and this one.
const DefaultSettle = 30 * time.Second

// maxWindowPages bounds one scan's reread of the settle window.
const maxWindowPages = 10

// KickNotice is the room_notice payload the kicked user gets: the
// RoomUserKicked fact with its envelope's identity. event_id is the one the
// room group's system message carries, so a client that gets both drops
// one by event_id.
type KickNotice struct {
	EventID        string `json:"event_id"`
	EventType      string `json:"event_type"`
	AppCode        string `json:"app_code"`
	RoomID         string `json:"room_id"`
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
	Reason         string `json:"reason"`
	BanUntilMs     int64  `json:"ban_until_ms"`
	CreatedAtMs    int64  `json:"created_at_ms"`
}

// Source is the read-only room_outbox scan of one event type by
// (created_at_ms, event_id): memdb.Store.RoomOutboxAfter or
// mysql.NoticeStore.RoomOutbox().
type Source = persistence.RoomOutboxReader

// FromEnvelope maps a room event to its private notice: RoomUserKicked →
// C2C room_notice to target_user_id only (the room group's message and the
// IM member removal stay with the room relay). ok is false for other
// types. A kick whose payload does not decode comes back failed (a dead
// letter with LastError), to the envelope's own key.
func FromEnvelope(env persistence.Envelope) (d persistence.NoticeDelivery, ok bool) {
	if !room.Causes(env.EventType, room.Notice) {
		return persistence.NoticeDelivery{}, false
	}
	d = persistence.NoticeDelivery{
		NoticeKey: persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: env.AppCode, SourceEventID: env.EventID,
			Channel: persistence.ChannelIMC2C},
		EventType:         env.EventType,
		Ext:               ExtRoomNotice,
		SourceCreatedAtMs: env.CreatedAtMs,
	}
	ev, err := room.DecodeEvent(env.EventType, env.Payload)
	k, isKick := ev.(room.RoomUserKicked)
	if err == nil && !isKick {
		err = fmt.Errorf("no notice is written for %s yet", env.EventType)
	}
	if err == nil {
		d.UserID = k.TargetUserID
		if k.TargetUserID == "" || env.RoomID == "" {
			err = errors.New("kick without target_user_id or room_id")
		} else {
			d.Payload, err = json.Marshal(KickNotice{
				EventID: env.EventID, EventType: env.EventType, AppCode: env.AppCode, RoomID: env.RoomID,
				TargetUserID: k.TargetUserID, OperatorUserID: k.OperatorUserID, Reason: k.Reason,
				BanUntilMs: k.BanUntilMs, CreatedAtMs: env.CreatedAtMs,
			})
		}
	}
	if err != nil {
		d.Status = persistence.NoticeFailed
		d.LastError = fmt.Sprintf("%v: %v", notice.ErrCorruptSource, err)
		d.Payload = json.RawMessage(`{}`)
		if json.Valid(env.Payload) {
			d.Payload = slices.Clone(env.Payload)
		}
	}
	return d, true
}

// IngestEnvelope is the MQ consumer's entry: it decodes one room_outbox
// envelope (the MQ fanout worker's message), and ingests the kick notice with
// ingress mq; other event types are ignored. It returns how many rows were
// new (0 when the scan, or an earlier delivery of the message, already
// wrote it: the primary key is the idempotency boundary). An envelope
// without an identity wraps notice.ErrCorruptSource: redelivering it
// cannot help.
func IngestEnvelope(ctx context.Context, store persistence.NoticeStore, data []byte, nowMs int64) (int, error) {
	var env persistence.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, fmt.Errorf("%w: envelope: %v", notice.ErrCorruptSource, err)
	}
	d, ok := FromEnvelope(env)
	if !ok {
		return 0, nil
	}
	if env.EventID == "" || env.AppCode == "" {
		return 0, fmt.Errorf("%w: envelope without event_id or app_code", notice.ErrCorruptSource)
	}
	d.Ingress = persistence.IngressMQ
	return store.Ingest(ctx, []persistence.NoticeDelivery{d}, nowMs)
}

// Scanner reads RoomUserKicked rows of room_outbox by (created_at_ms,
// event_id) for the room notice worker. created_at_ms is stamped before
// the row commits, so a kick can become visible behind the position
// already read; each scan therefore rereads the kicks created within
// settle before the previous scan (kicks are rare, the reread is small)
// and hands out those it has not seen. The cursor it hands back to persist
// is at most now-settle, so a restart rereads that window too (ingest
// ignores what it already has).
type Scanner struct {
	src    Source
	settle time.Duration

	high       persistence.NoticeCursor
	lastScanMs int64            // when the last complete scan ran; 0 after Reset
	seen       map[string]int64 // event ids handed out within the window → created_at_ms
}

// Option tunes a Scanner.
type Option func(*Scanner)

// WithSettle sets the reread window (default DefaultSettle).
func WithSettle(d time.Duration) Option { return func(s *Scanner) { s.settle = d } }

// NewScanner returns a scanner of src; the worker Resets it to the stored
// cursor before the first scan.
func NewScanner(src Source, opts ...Option) *Scanner {
	s := &Scanner{src: src, settle: DefaultSettle, seen: map[string]int64{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Module is the room notice module. src nil: this process does not scan
// room_outbox (the MQ consumer ingests) and the worker only delivers.
func Module(src Source, opts ...Option) notice.Module {
	m := notice.Module{Name: WorkerName, Source: persistence.SourceRoomOutbox}
	if src != nil {
		m.Scanner = NewScanner(src, opts...)
	}
	return m
}

// noticeType is the event type whose row causes a notice (room.Notice):
// the outbox is read, and its MQ messages taken, by it. One type: a
// second would need the scan to read by several (it panics at start
// rather than miss its notices; the test says the same).
var noticeType = onlyNoticeType()

func onlyNoticeType() string {
	types := room.TypesCausing(room.Notice)
	if len(types) != 1 {
		panic(fmt.Sprintf("roomnotice: the scan reads one event type, the registry has %d causing a notice: %v", len(types), types))
	}
	return types[0]
}

// Reset implements notice.Scanner.
func (s *Scanner) Reset(from persistence.NoticeCursor) {
	s.high = from
	s.lastScanMs = 0
	clear(s.seen)
}

// Scan implements notice.Scanner.
func (s *Scanner) Scan(ctx context.Context, nowMs int64, limit int) (notice.ScanResult, error) {
	var res notice.ScanResult
	rows, err := s.src.RoomOutboxAfter(ctx, noticeType, s.high.Num, s.high.Key, limit)
	if err != nil {
		return res, err
	}
	res.More = len(rows) >= limit
	for _, r := range rows {
		pos := persistence.NoticeCursor{Num: r.CreatedAtMs, Key: r.Envelope.EventID}
		if s.high.Less(pos) {
			s.high = pos
		}
		res.Deliveries = s.add(res.Deliveries, r)
	}
	complete := true
	if s.lastScanMs > 0 {
		// Kicks that became visible since the last scan were created at
		// most settle before they committed.
		pos := persistence.NoticeCursor{Num: s.lastScanMs - s.settle.Milliseconds() - 1, Key: "\xff"}
		complete = false
		for page := 0; page < maxWindowPages && pos.Less(s.high); page++ {
			late, err := s.src.RoomOutboxAfter(ctx, noticeType, pos.Num, pos.Key, limit)
			if err != nil {
				return notice.ScanResult{}, err
			}
			done := len(late) < limit
			for _, r := range late {
				p := persistence.NoticeCursor{Num: r.CreatedAtMs, Key: r.Envelope.EventID}
				if s.high.Less(p) {
					done = true // the window is read up to high; newer rows are the next scan's
					break
				}
				pos = p
				res.Deliveries = s.add(res.Deliveries, r)
			}
			if done {
				complete = true
				break
			}
		}
		if !pos.Less(s.high) {
			complete = true
		}
	}
	if complete {
		// An incomplete reread keeps the old window start for next time.
		s.lastScanMs = nowMs
	}
	for id, created := range s.seen {
		if created < s.lastScanMs-2*s.settle.Milliseconds() {
			delete(s.seen, id)
		}
	}
	res.Safe = s.high
	if bound := (persistence.NoticeCursor{Num: s.lastScanMs - s.settle.Milliseconds()}); bound.Less(res.Safe) {
		res.Safe = bound
	}
	return res, nil
}

func (s *Scanner) add(out []persistence.NoticeDelivery, r persistence.OutboxRow) []persistence.NoticeDelivery {
	if _, dup := s.seen[r.Envelope.EventID]; dup {
		return out
	}
	env := r.Envelope
	if env.EventID == "" {
		return out
	}
	if env.CreatedAtMs == 0 {
		env.CreatedAtMs = r.CreatedAtMs
	}
	if d, ok := FromEnvelope(env); ok {
		s.seen[env.EventID] = r.CreatedAtMs
		out = append(out, d)
	}
	return out
}

// App is the room notice module as the notice role runs it (one entry of
// noticeapp.Deps.Modules). src reads room_outbox; it may be nil when
// notice.room_notice_worker is off. A PartedSource of several room
// databases is scanned per database (PartsScanner). The worker runs when it scans or when
// notice.mq.room_outbox is on: then a consumer group ingests
// RoomUserKicked messages and the worker only delivers them.
func App(src Source) noticeapp.Module {
	return func(d noticeapp.Deps) (noticeapp.Plan, error) {
		cfg := d.Config
		mqOn := cfg.MQ.RoomOutboxOn()
		p := noticeapp.Plan{Run: cfg.RoomNoticeWorker.Enabled || mqOn, Config: cfg.RoomNoticeWorker}
		var scan Source
		if cfg.RoomNoticeWorker.Enabled {
			if src == nil {
				return p, errors.New("notice: room_notice_worker is enabled but there is no room_outbox source")
			}
			scan = src
		}
		var opts []Option
		if d.Settle > 0 {
			opts = append(opts, WithSettle(d.Settle))
		}
		p.Worker = Module(scan, opts...)
		if ps, ok := scan.(PartedSource); ok {
			if keys, _ := ps.Parts(); len(keys) > 1 {
				// One scan per room database: a slow one delays only its
				// own rooms' kicks.
				p.Worker.Scanner = NewPartsScanner(ps, 0, d.Logger, opts...)
			}
		}
		if mqOn {
			p.Subscription = func(kick func()) mq.Subscription {
				return mq.Subscription{
					Topic: cfg.MQ.RoomOutbox.Topic, Group: cfg.MQ.RoomOutbox.ConsumerGroup,
					Tags: []string{noticeType}, MaxRedeliver: cfg.MQ.RoomOutbox.MaxRedeliver,
					Handler: OutboxHandler(d.Store, kick, d.Metrics),
				}
			}
		}
		return p, nil
	}
}

// OutboxHandler is the notice consumer group's handler: ingest the
// kick's notice (ingress mq) and ask the room worker to deliver it now. A
// message that cannot be decoded is dropped; a store error has it
// redelivered.
func OutboxHandler(store persistence.NoticeStore, kick func(), m *notice.Metrics) mq.Handler {
	return func(ctx context.Context, msg mq.Message) error {
		n, err := IngestEnvelope(ctx, store, msg.Data, time.Now().UnixMilli())
		if errors.Is(err, notice.ErrCorruptSource) {
			return fmt.Errorf("%w: %v", mq.ErrDrop, err)
		}
		if err != nil {
			return err
		}
		if n > 0 {
			if m != nil {
				m.Ingested.WithLabelValues(persistence.SourceRoomOutbox, persistence.IngressMQ).Add(float64(n))
			}
			if kick != nil {
				kick()
			}
		}
		return nil
	}
}
