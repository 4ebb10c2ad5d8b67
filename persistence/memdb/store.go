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
	s := &Store{db: db, mqStatus: persistence.OutboxMQNone}
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

// outboxEntry is the stored form of a room_outbox row. The index fields are
// copies of fields of Row, set only by newOutboxEntry so they cannot drift.
type outboxEntry struct {
	EventID       string
	Status        string
	CreatedAtMs   int64
	AppCode       string
	RoomID        string
	RoomSeq       int64
	NextRetryAtMs int64
	MQStatus      string
	Row           persistence.OutboxRow
}

// pending: the row waits for IM (the claim's indexes hold only these).
func (e *outboxEntry) pending() bool { return e.Status == persistence.OutboxPending }

func newOutboxEntry(row persistence.OutboxRow) *outboxEntry {
	if row.MQStatus == "" {
		row.MQStatus = persistence.OutboxMQNone
	}
	return &outboxEntry{
		EventID:       row.Envelope.EventID,
		Status:        row.Status,
		CreatedAtMs:   row.CreatedAtMs,
		AppCode:       row.Envelope.AppCode,
		RoomID:        row.Envelope.RoomID,
		RoomSeq:       row.Envelope.RoomSeq,
		NextRetryAtMs: row.NextRetryAtMs,
		MQStatus:      row.MQStatus,
		Row:           row,
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

func cloneOutboxRow(r persistence.OutboxRow) persistence.OutboxRow {
	r.Envelope = cloneEnvelope(r.Envelope)
	return r
}
