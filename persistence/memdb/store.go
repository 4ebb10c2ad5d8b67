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
// own fields are kept once (issue 13: the row with its index copies and a
// second envelope was ~440 bytes and a payload; it is ~200 now).
// newOutboxEntry and row convert, TestOutboxEntryKeepsEveryField guards
// them against a field added to persistence.OutboxRow.
type outboxEntry struct {
	*persistence.Envelope

	Status          string
	RetryCount      int
	LastError       string
	CreatedAtMs     int64
	UpdatedAtMs     int64
	PublishedAtMs   int64
	LockedBy        string
	LockUntilMs     int64
	NextRetryAtMs   int64
	ResolvedBy      string
	ResolvedAtMs    int64
	Resolution      string
	MQStatus        string
	MQPublishedAtMs int64
	MQLockedBy      string
	MQLockUntilMs   int64
}

// pending: the row waits for IM (the claim's indexes hold only these).
func (e *outboxEntry) pending() bool { return e.Status == persistence.OutboxPending }

// newOutboxEntry stores row's fields with env as its envelope (row's own
// Envelope is not read: an update keeps the stored one).
func newOutboxEntry(env *persistence.Envelope, row persistence.OutboxRow) *outboxEntry {
	if row.MQStatus == "" {
		row.MQStatus = persistence.OutboxMQNone
	}
	return &outboxEntry{
		Envelope: env,
		Status:   row.Status, RetryCount: row.RetryCount, LastError: row.LastError,
		CreatedAtMs: row.CreatedAtMs, UpdatedAtMs: row.UpdatedAtMs, PublishedAtMs: row.PublishedAtMs,
		LockedBy: row.LockedBy, LockUntilMs: row.LockUntilMs, NextRetryAtMs: row.NextRetryAtMs,
		ResolvedBy: row.ResolvedBy, ResolvedAtMs: row.ResolvedAtMs, Resolution: row.Resolution,
		MQStatus: row.MQStatus, MQPublishedAtMs: row.MQPublishedAtMs, MQLockedBy: row.MQLockedBy, MQLockUntilMs: row.MQLockUntilMs,
	}
}

// row returns a copy of the row the caller may keep and change (the
// payload is cloned).
func (e *outboxEntry) row() persistence.OutboxRow {
	return persistence.OutboxRow{
		Envelope: cloneEnvelope(*e.Envelope),
		Status:   e.Status, RetryCount: e.RetryCount, LastError: e.LastError,
		CreatedAtMs: e.CreatedAtMs, UpdatedAtMs: e.UpdatedAtMs, PublishedAtMs: e.PublishedAtMs,
		LockedBy: e.LockedBy, LockUntilMs: e.LockUntilMs, NextRetryAtMs: e.NextRetryAtMs,
		ResolvedBy: e.ResolvedBy, ResolvedAtMs: e.ResolvedAtMs, Resolution: e.Resolution,
		MQStatus: e.MQStatus, MQPublishedAtMs: e.MQPublishedAtMs, MQLockedBy: e.MQLockedBy, MQLockUntilMs: e.MQLockUntilMs,
	}
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
