package walletnotice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence"
)

// WorkerName is the worker's actor name, log `worker` field and metrics
// label.
const WorkerName = "wallet_notice_worker"

// Ext values of the C2C TIMCustomElem (seed 003).
const (
	ExtWalletNotice = "wallet_notice"
	ExtVipNotice    = "vip_notice"
)

// DefaultSettle is how long a gap in wallet_outbox ids is waited for
// before the cursor passes it: a missing id is a transaction that took it
// and has not committed yet, or one that rolled back (a deadlock retry of
// the wallet, then it never comes). A wallet transaction lives at most
// mysql.query_timeout (3 s by default) plus its retries; 30 s leaves room
// for clock skew too.
const DefaultSettle = 30 * time.Second

// maxGap bounds the ids one gap may add to the missing set, and maxMissing
// the set: a wider gap (an auto_increment jump) is taken as permanent at
// once instead of tracking every id of it.
const (
	maxGap     = 1000
	maxMissing = 10_000
)

// Source is the read-only wallet_outbox scan: persistence.WalletStore (memdb or the
// wallet's own MySQL store) or mysql.NoticeStore.WalletOutbox() (the wallet
// database read by qualified name on the notice pool).
type Source = persistence.WalletOutboxReader

// FromOutbox maps one wallet_outbox row to its notice: WalletBalanceChanged
// → Ext wallet_notice, VipActivated → Ext vip_notice, each to the row's
// user, with the seed's payload re-encoded field for field (so the client
// gets exactly the seed's fields, metadata {} and reward_items [] rather
// than null). ok is false for event types that are not notices. A row whose
// payload does not decode or disagrees with its columns comes back as a
// failed row (Status failed, LastError set): a dead letter operators can
// see, never retried.
func FromOutbox(rec persistence.WalletOutboxRecord) (d persistence.NoticeDelivery, ok bool) {
	d = persistence.NoticeDelivery{
		NoticeKey: persistence.NoticeKey{SourceName: persistence.SourceWalletOutbox, AppCode: rec.AppCode, SourceEventID: rec.EventID,
			Channel: persistence.ChannelIMC2C},
		EventType:         rec.EventType,
		UserID:            rec.UserID,
		SourceCreatedAtMs: rec.CreatedAtMs,
	}
	var payload any
	var err error
	switch rec.EventType {
	case persistence.EventBalanceChanged:
		d.Ext = ExtWalletNotice
		payload, err = balancePayload(rec)
	case persistence.EventVipActivated:
		d.Ext = ExtVipNotice
		payload, err = vipPayload(rec)
	default:
		return persistence.NoticeDelivery{}, false
	}
	if err == nil {
		d.Payload, err = json.Marshal(payload)
	}
	if err != nil {
		d.Status = persistence.NoticeFailed
		d.LastError = fmt.Sprintf("%v: %v", notice.ErrCorruptSource, err)
		d.Payload = rawOrQuoted(rec.Payload)
	}
	return d, true
}

// rawOrQuoted keeps a corrupt payload for operators: as it is when it is
// JSON, else as a JSON string.
func rawOrQuoted(b []byte) json.RawMessage {
	if json.Valid(b) {
		return slices.Clone(b)
	}
	q, _ := json.Marshal(string(b))
	return q
}

func check(rec persistence.WalletOutboxRecord, eventType, eventID, appCode, userID string) error {
	switch {
	case eventType != rec.EventType:
		return fmt.Errorf("payload event_type %q, row %q", eventType, rec.EventType)
	case eventID != rec.EventID:
		return fmt.Errorf("payload event_id %q, row %q", eventID, rec.EventID)
	case appCode != rec.AppCode:
		return fmt.Errorf("payload app_code %q, row %q", appCode, rec.AppCode)
	case userID == "" || userID != rec.UserID:
		return fmt.Errorf("payload user_id %q, row %q", userID, rec.UserID)
	}
	return nil
}

func balancePayload(rec persistence.WalletOutboxRecord) (wallet.BalanceChanged, error) {
	var p wallet.BalanceChanged
	if err := json.Unmarshal(rec.Payload, &p); err != nil {
		return p, fmt.Errorf("payload: %v", err)
	}
	if err := check(rec, p.EventType, p.EventID, p.AppCode, p.UserID); err != nil {
		return p, err
	}
	if p.AssetType == "" || p.BalanceVersion <= 0 {
		return p, fmt.Errorf("payload has no asset_type or balance_version")
	}
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	return p, nil
}

func vipPayload(rec persistence.WalletOutboxRecord) (wallet.VipActivated, error) {
	var p wallet.VipActivated
	if err := json.Unmarshal(rec.Payload, &p); err != nil {
		return p, fmt.Errorf("payload: %v", err)
	}
	if err := check(rec, p.EventType, p.EventID, p.AppCode, p.UserID); err != nil {
		return p, err
	}
	if p.RewardItems == nil {
		p.RewardItems = []wallet.RewardItem{}
	}
	return p, nil
}

// Scanner reads wallet_outbox by id for the wallet notice worker. Ids are
// taken at insert and become visible at commit, so a scan can see id 7
// before id 6 exists: the scanner remembers such gaps (ids it passed
// without seeing) and looks for them again on every scan until they show
// up or settle has passed since it noticed them. The cursor it hands back
// to persist stops just before the oldest open gap, so a restart rereads
// from there (ingest ignores what it already has).
type Scanner struct {
	src    Source
	settle time.Duration
	log    *slog.Logger
	source string // source_name of the rows handed out

	high    int64           // highest id read
	missing map[int64]int64 // gap id → when it was noticed (ms)
}

// Option tunes a Scanner.
type Option func(*Scanner)

// WithSettle sets how long a gap is waited for (default DefaultSettle).
func WithSettle(d time.Duration) Option { return func(s *Scanner) { s.settle = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Scanner) { s.log = l } }

// WithSourceName files the rows and the cursor under another source_name
// than wallet_outbox: the real-database verification runs next to a live
// notice service without touching its rows or its cursor.
func WithSourceName(name string) Option { return func(s *Scanner) { s.source = name } }

// NewScanner returns a scanner of src; the worker Resets it to the stored
// cursor before the first scan.
func NewScanner(src Source, opts ...Option) *Scanner {
	s := &Scanner{src: src, settle: DefaultSettle, log: slog.Default(), source: persistence.SourceWalletOutbox, missing: map[int64]int64{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Module is the wallet notice module over src.
func Module(src Source, opts ...Option) notice.Module {
	sc := NewScanner(src, opts...)
	return notice.Module{Name: WorkerName, Source: sc.source, Scanner: sc}
}

// Reset implements notice.Scanner.
func (s *Scanner) Reset(from persistence.NoticeCursor) {
	s.high = from.Num
	clear(s.missing)
}

// Scan implements notice.Scanner: read up to limit rows after the highest
// id read, look again for the open gaps, expire the gaps older than
// settle that this look covered.
func (s *Scanner) Scan(ctx context.Context, nowMs int64, limit int) (notice.ScanResult, error) {
	var res notice.ScanResult
	rows, err := s.src.ListOutboxAfter(ctx, s.high, limit)
	if err != nil {
		return res, err
	}
	res.More = len(rows) >= limit
	for _, r := range rows {
		if r.ID <= s.high {
			continue
		}
		if gap := r.ID - s.high - 1; gap > 0 {
			if gap > maxGap || len(s.missing)+int(gap) > maxMissing {
				s.log.Warn("wallet_outbox id gap too wide to wait for: taken as permanent", slog.String("worker", WorkerName),
					slog.Int64("after_id", s.high), slog.Int64("next_id", r.ID))
			} else {
				for id := s.high + 1; id < r.ID; id++ {
					s.missing[id] = nowMs
				}
			}
		}
		s.high = r.ID
		res.Deliveries = s.add(res.Deliveries, r)
	}
	if len(s.missing) > 0 {
		lo := s.oldestMissing()
		late, err := s.src.ListOutboxAfter(ctx, lo-1, limit)
		if err != nil {
			return notice.ScanResult{}, err
		}
		// The look covered the ids up to its last row, or all of them
		// when it ended early.
		covered := s.high
		if len(late) >= limit {
			covered = late[len(late)-1].ID
		}
		for _, r := range late {
			if _, open := s.missing[r.ID]; open {
				delete(s.missing, r.ID)
				res.Deliveries = s.add(res.Deliveries, r)
			}
		}
		for id, at := range s.missing {
			if id <= covered && nowMs-at >= s.settle.Milliseconds() {
				delete(s.missing, id)
			}
		}
	}
	res.Safe = persistence.NoticeCursor{Num: s.high}
	if len(s.missing) > 0 {
		res.Safe.Num = s.oldestMissing() - 1
	}
	return res, nil
}

func (s *Scanner) oldestMissing() int64 {
	lo := int64(-1)
	for id := range s.missing {
		if lo < 0 || id < lo {
			lo = id
		}
	}
	return lo
}

func (s *Scanner) add(out []persistence.NoticeDelivery, r persistence.WalletOutboxRecord) []persistence.NoticeDelivery {
	if d, ok := FromOutbox(r); ok {
		d.SourceName = s.source
		out = append(out, d)
	}
	return out
}

// App is the wallet notice module as the notice role runs it (one entry
// of noticeapp.Deps.Modules): a worker scanning src (wallet_outbox) when
// notice.wallet_notice_worker is on. src nil with the worker on fails
// noticeapp.Start.
func App(src Source) noticeapp.Module {
	return func(d noticeapp.Deps) (noticeapp.Plan, error) {
		cfg := d.Config.WalletNoticeWorker
		p := noticeapp.Plan{Run: cfg.Enabled, Config: cfg}
		if !cfg.Enabled {
			return p, nil
		}
		if src == nil {
			return p, errors.New("notice: wallet_notice_worker is enabled but there is no wallet_outbox source")
		}
		opts := []Option{WithLogger(d.Logger)}
		if d.Settle > 0 {
			opts = append(opts, WithSettle(d.Settle))
		}
		p.Worker = Module(src, opts...)
		return p, nil
	}
}
