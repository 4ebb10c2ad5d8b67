package wallet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Limits on input, checked before anything reaches the store.
const (
	MaxIDLen     = 64
	MaxGiftCount = 1_000_000
	MaxReasonLen = 64
)

// Service runs wallet operations against a persistence.WalletStore. It is safe for
// concurrent use: all serialisation happens in the store's transaction.
type Service struct {
	store          persistence.WalletStore
	gifts          map[string]configs.GiftConfig
	diamondPercent int64
	vips           map[int32]VipPlan
	now            func() int64
	newID          func() string
	log            *slog.Logger
}

// Option adjusts a Service.
type Option func(*Service)

// WithClock sets the clock (Unix ms); tests inject a fixed one.
func WithClock(now func() int64) Option { return func(s *Service) { s.now = now } }

// WithTxIDs sets the transaction id generator (default "wtx_" + random).
func WithTxIDs(f func() string) Option { return func(s *Service) { s.newID = f } }

// WithVipPlans replaces DefaultVipPlans.
func WithVipPlans(ps []VipPlan) Option {
	return func(s *Service) { s.vips, _ = vipCatalog(ps) }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// NewService builds a Service over store with the gift catalog and the
// diamond ratio of cfg.
func NewService(store persistence.WalletStore, gifts []configs.GiftConfig, cfg configs.WalletConfig, opts ...Option) (*Service, error) {
	if store == nil {
		return nil, errors.New("wallet: nil store")
	}
	gm, err := giftCatalog(gifts)
	if err != nil {
		return nil, err
	}
	if cfg.DiamondPercent < 0 {
		return nil, fmt.Errorf("wallet: diamond_percent %d is negative", cfg.DiamondPercent)
	}
	vm, _ := vipCatalog(DefaultVipPlans())
	s := &Service{
		store:          store,
		gifts:          gm,
		diamondPercent: cfg.DiamondPercent,
		vips:           vm,
		now:            func() int64 { return time.Now().UnixMilli() },
		newID:          randomTxID,
		log:            slog.Default(),
	}
	for _, o := range opts {
		o(s)
	}
	if s.vips == nil {
		return nil, errors.New("wallet: bad VIP plans")
	}
	return s, nil
}

func randomTxID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "wtx_" + hex.EncodeToString(b[:])
}

// Gift returns the catalog entry of id.
func (s *Service) Gift(id string) (configs.GiftConfig, bool) {
	g, ok := s.gifts[id]
	return g, ok
}

// VipPlans returns the VIP catalog entry of level.
func (s *Service) VipPlan(level int32) (VipPlan, bool) {
	p, ok := s.vips[level]
	return p, ok
}

// Balances is a user's wallet summary.
type Balances struct {
	AppCode  string
	UserID   string
	Accounts []persistence.Account // one per asset of Assets, zero when never used
	Vip      persistence.Vip       // zero when never VIP
	// VipActiveLevel is the level in force now (0 when expired).
	VipActiveLevel int32
}

// GetBalances returns the user's balances and VIP state.
func (s *Service) GetBalances(ctx context.Context, appCode, userID string) (Balances, error) {
	if err := checkID("app_code", appCode); err != nil {
		return Balances{}, err
	}
	if err := checkID("user_id", userID); err != nil {
		return Balances{}, err
	}
	accs, err := s.store.Accounts(ctx, appCode, userID)
	if err != nil {
		return Balances{}, classify(err)
	}
	b := Balances{AppCode: appCode, UserID: userID}
	for _, asset := range Assets {
		a := persistence.Account{AppCode: appCode, UserID: userID, AssetType: asset}
		for _, x := range accs {
			if x.AssetType == asset {
				a = x
			}
		}
		b.Accounts = append(b.Accounts, a)
	}
	v, err := s.store.Vip(ctx, appCode, userID)
	switch {
	case err == nil:
		b.Vip = v
		b.VipActiveLevel = v.ActiveLevel(s.now())
	case errors.Is(err, persistence.ErrNotFound):
	default:
		return Balances{}, classify(err)
	}
	return b, nil
}

// exec runs tx and decodes the (first) result into out. A repeated
// command_id whose request differs is ErrCommandReused.
func (s *Service) exec(ctx context.Context, tx persistence.WalletTx, fingerprint string, out any) (bool, error) {
	rc, err := s.store.Exec(ctx, tx)
	if err != nil {
		return false, classify(err)
	}
	if rc.Duplicate && rc.Record.Fingerprint != fingerprint {
		return false, fmt.Errorf("%w: command_id %q was used for a different %s request", ErrCommandReused, tx.CommandID, rc.Record.Kind)
	}
	if err := json.Unmarshal(rc.Record.Result, out); err != nil {
		return false, fmt.Errorf("wallet: decode result of %s: %w", rc.Record.TransactionID, err)
	}
	if !rc.Duplicate {
		s.log.Debug("wallet transaction", "app_code", tx.AppCode, "command_id", tx.CommandID,
			"transaction_id", rc.Record.TransactionID, "kind", rc.Record.Kind)
	}
	return rc.Duplicate, nil
}

// classify keeps the service's own classes (from Decide) and turns store
// outages and deadlines into ErrUnavailable.
func classify(err error) error {
	switch {
	case errors.Is(err, errclass.Invalid), errors.Is(err, errclass.Precondition),
		errors.Is(err, ErrCommandReused), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, persistence.ErrUnavailable), errors.Is(err, persistence.ErrConflict),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// planner accumulates one transaction's changes.
type planner struct {
	p persistence.WalletPlan
}

func newPlanner(appCode, commandID, txID, kind, fingerprint string, nowMs int64) *planner {
	return &planner{p: persistence.WalletPlan{
		NowMs:  nowMs,
		Record: persistence.WalletTxRecord{TransactionID: txID, AppCode: appCode, CommandID: commandID, Kind: kind, Fingerprint: fingerprint, CreatedAtMs: nowMs},
	}}
}

// change moves old.Available by delta, bumps the version and adds the
// ledger entry and the WalletBalanceChanged row. It returns the new state.
func (pl *planner) change(old persistence.Account, delta int64, meta map[string]string) persistence.Account {
	return pl.move(old, delta, 0, meta)
}

// move is change for both balances: available by delta, frozen by
// frozenDelta (a gift's reserve, confirm and refund).
func (pl *planner) move(old persistence.Account, delta, frozenDelta int64, meta map[string]string) persistence.Account {
	now := pl.p.NowMs
	a := old
	a.Available += delta
	a.Frozen += frozenDelta
	a.BalanceVersion++
	a.UpdatedAtMs = now
	r := pl.p.Record
	pl.p.Accounts = append(pl.p.Accounts, a)
	pl.p.Ledger = append(pl.p.Ledger, persistence.LedgerEntry{
		TransactionID: r.TransactionID, CommandID: r.CommandID,
		AppCode: a.AppCode, UserID: a.UserID, AssetType: a.AssetType,
		AvailableDelta: delta, FrozenDelta: frozenDelta, AvailableAfter: a.Available, FrozenAfter: a.Frozen,
		BalanceVersion: a.BalanceVersion, CreatedAtMs: now,
	})
	if meta == nil {
		meta = map[string]string{}
	}
	ev := BalanceChanged{
		EventType: persistence.EventBalanceChanged, EventID: persistence.BalanceEventID(r.TransactionID, a.UserID, a.AssetType),
		AppCode: a.AppCode, TransactionID: r.TransactionID, CommandID: r.CommandID,
		UserID: a.UserID, AssetType: a.AssetType,
		AvailableDelta: delta, FrozenDelta: frozenDelta, AvailableAfter: a.Available, FrozenAfter: a.Frozen,
		BalanceVersion: a.BalanceVersion, CreatedAtMs: now, SourceCreatedAtMs: now, Metadata: meta,
	}
	pl.outbox(ev.EventID, a.UserID, ev.EventType, ev)
	return a
}

func (pl *planner) outbox(id, userID, typ string, payload any) {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err) // payloads are plain structs of strings and ints
	}
	pl.p.Outbox = append(pl.p.Outbox, persistence.WalletOutboxEvent{EventID: id, AppCode: pl.p.Record.AppCode, UserID: userID, EventType: typ, Payload: b})
}

func (pl *planner) done(result any) (persistence.WalletPlan, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return persistence.WalletPlan{}, err
	}
	pl.p.Record.Result = b
	return pl.p, nil
}

func checkID(field, v string) error {
	if v == "" {
		return errclass.Invalidf("%s is required", field)
	}
	if len(v) > MaxIDLen {
		return errclass.Invalidf("%s is longer than %d bytes", field, MaxIDLen)
	}
	for i := 0; i < len(v); i++ {
		// ':' and '/' join ids into event ids and keys.
		if c := v[i]; c <= ' ' || c >= 0x7f || c == ':' || c == '/' {
			return errclass.Invalidf("%s has a character that is not allowed at byte %d (printable ASCII without space, ':' or '/')", field, i)
		}
	}
	return nil
}

func checkIDs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkID(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
