package memdb

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// Store is the go-memdb room store. The zero value is not usable; call New.
type Store struct {
	db     *memdb.MemDB
	closed atomic.Bool
	leases purgeLeases // purge.go
	// mqStatus is the MQStatus of new outbox rows: pending when the MQ
	// fanout is on (WithOutboxMQ), none otherwise.
	mqStatus string
	// log is room_command_log with its command ids (commandlog.go),
	// stored like outbox.
	log *commandLog
	// writes groups concurrent Appends into one write transaction.
	writes writeGroup
	// outbox is room_outbox (outboxtable.go): Append stores its rows
	// under go-memdb's writer lock, just before the transaction that
	// wrote the command commits.
	outbox *outboxTable
}

// Option tunes New.
type Option func(*Store)

// WithOutboxMQ: the room_outbox MQ fanout is on (notice.mq.room_outbox), so
// new outbox rows wait for it (MQStatus pending) as well as for IM.
func WithOutboxMQ() Option { return func(s *Store) { s.mqStatus = persistence.OutboxMQPending } }

var _ persistence.Store = (*Store)(nil)

// New returns an empty room store.
func New(opts ...Option) *Store {
	db, err := memdb.NewMemDB(roomSchema())
	if err != nil {
		// The schema is a constant of this package: failing here is a bug,
		// not a runtime condition.
		panic(fmt.Sprintf("memdb: room schema: %v", err))
	}
	s := &Store{db: db, mqStatus: persistence.OutboxMQNone, log: newCommandLog(), outbox: newOutboxTable()}
	// The log and outbox rows are stored just before the commit, as the
	// rest of the append becomes visible.
	s.writes = writeGroup{db: db, beforeCommit: func(b *groupTxn) {
		s.log.putAll(b.logs)
		s.outbox.putAll(b.outbox)
	}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Close makes every later call fail with ErrUnavailable, as a closed MySQL
// pool would, so a shutdown-order bug shows up in dev mode too.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// ready is the entry check of every method: a cancelled caller gets its
// context error before anything is read or written.
func (s *Store) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("memdb: store closed: %w", persistence.ErrUnavailable)
	}
	return nil
}

// outboxEntry is the stored form of a room_outbox row: its envelope is
// the one of the stored command log row (Append points at it rather than
// keeping a copy; nothing ever changes a stored envelope), and the row's
// own fields are kept once (the row with its index copies and a
// second envelope was ~440 bytes and a payload). The fields most rows
// never set (a failure, a resolution, the MQ fanout's lease) are kept
// apart, so a row that went out at once is 112 bytes, not 208.
// newOutboxEntry and row convert, TestOutboxEntryKeepsEveryField guards
// them against a field added to persistence.OutboxRow.
type outboxEntry struct {
	*persistence.Envelope

	Status        string
	MQStatus      string
	LockedBy      string
	RetryCount    int32
	EventIndex    int32 // the event's place in its command (OutboxRow.EventIndex)
	CreatedAtMs   int64
	UpdatedAtMs   int64
	PublishedAtMs int64
	LockUntilMs   int64
	NextRetryAtMs int64
	rare          *outboxRare // nil while all its fields are zero
}

// outboxRare is the part of a row most rows leave zero.
type outboxRare struct {
	LastError       string
	ResolvedBy      string
	Resolution      string
	MQLockedBy      string
	ResolvedAtMs    int64
	MQPublishedAtMs int64
	MQLockUntilMs   int64
	EffectsDone     uint32
}

// pending: the row waits for IM (the claim's indexes hold only these).
func (e *outboxEntry) pending() bool { return e.Status == persistence.OutboxPending }

// mqLockUntilMs is the end of the MQ fanout's lease on the row (0: none).
func (e *outboxEntry) mqLockUntilMs() int64 {
	if e.rare == nil {
		return 0
	}
	return e.rare.MQLockUntilMs
}

// newOutboxEntry stores row's fields with env as its envelope (row's own
// Envelope is not read: an update keeps the stored one).
func newOutboxEntry(env *persistence.Envelope, row persistence.OutboxRow) *outboxEntry {
	if row.MQStatus == "" {
		row.MQStatus = persistence.OutboxMQNone
	}
	e := &outboxEntry{
		Envelope: env,
		Status:   row.Status, MQStatus: row.MQStatus, LockedBy: row.LockedBy, RetryCount: int32(row.RetryCount),
		EventIndex:  int32(row.EventIndex),
		CreatedAtMs: row.CreatedAtMs, UpdatedAtMs: row.UpdatedAtMs, PublishedAtMs: row.PublishedAtMs,
		LockUntilMs: row.LockUntilMs, NextRetryAtMs: row.NextRetryAtMs,
	}
	rare := outboxRare{
		LastError: row.LastError, ResolvedBy: row.ResolvedBy, Resolution: row.Resolution, MQLockedBy: row.MQLockedBy,
		ResolvedAtMs: row.ResolvedAtMs, MQPublishedAtMs: row.MQPublishedAtMs, MQLockUntilMs: row.MQLockUntilMs,
		EffectsDone: row.EffectsDone,
	}
	if rare != (outboxRare{}) {
		e.rare = &rare
	}
	return e
}

// row returns a copy of the row the caller may keep and change (the
// payload is cloned).
func (e *outboxEntry) row() persistence.OutboxRow {
	r := e.fields()
	r.Envelope = cloneEnvelope(*e.Envelope)
	return r
}

// fields is the row with the stored envelope's payload shared, not
// cloned: for an update, whose change reads and writes the row's own
// fields and whose new entry keeps the stored envelope (newOutboxEntry),
// so the copy of a payload per mark was garbage at once.
func (e *outboxEntry) fields() persistence.OutboxRow {
	r := persistence.OutboxRow{
		Envelope: *e.Envelope,
		Status:   e.Status, MQStatus: e.MQStatus, LockedBy: e.LockedBy, RetryCount: int(e.RetryCount),
		EventIndex:  int(e.EventIndex),
		CreatedAtMs: e.CreatedAtMs, UpdatedAtMs: e.UpdatedAtMs, PublishedAtMs: e.PublishedAtMs,
		LockUntilMs: e.LockUntilMs, NextRetryAtMs: e.NextRetryAtMs,
	}
	if x := e.rare; x != nil {
		r.LastError, r.ResolvedBy, r.Resolution, r.MQLockedBy = x.LastError, x.ResolvedBy, x.Resolution, x.MQLockedBy
		r.ResolvedAtMs, r.MQPublishedAtMs, r.MQLockUntilMs = x.ResolvedAtMs, x.MQPublishedAtMs, x.MQLockUntilMs
		r.EffectsDone = x.EffectsDone
	}
	return r
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneEnvelope(e persistence.Envelope) persistence.Envelope {
	e.Payload = json.RawMessage(cloneBytes(e.Payload))
	return e
}

func cloneCommand(c persistence.CommandRecord) persistence.CommandRecord {
	c.Reply = cloneBytes(c.Reply)
	c.Sealed = cloneBytes(c.Sealed)
	if c.Events != nil {
		events := make([]persistence.Envelope, len(c.Events))
		for i, e := range c.Events {
			events[i] = cloneEnvelope(e)
		}
		c.Events = events
	}
	return c
}

func cloneSnapshot(s persistence.Snapshot) persistence.Snapshot {
	s.State = cloneBytes(s.State)
	return s
}
