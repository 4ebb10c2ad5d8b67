package memdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// errInvalid marks an Append the tables cannot index (go-memdb does not
// index empty strings, so an empty key would dodge the fences).
var errInvalid = errors.New("memdb: invalid append")

// Append implements persistence.RoomStore. Appends that arrive while
// another is being written are written with it, in one transaction (see
// writeGroup); each is checked on its own against everything before it,
// the group's earlier appends included, and fails alone.
func (s *Store) Append(ctx context.Context, a persistence.Append) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := validateAppend(a); err != nil {
		return err
	}
	return s.writes.do(func(b *groupTxn) error {
		if err := s.checkAppend(b, a); err != nil {
			return err // nothing written
		}
		if err := s.writeAppend(b, a); err != nil {
			b.dirty = true
			return err
		}
		return nil
	})
}

// checkAppend reads whether a may be written in b: its epoch against the
// room's fence, its seq, command_id and event ids against what is stored
// and what b's earlier appends staged, a voided gift. It writes nothing.
func (s *Store) checkAppend(b *groupTxn, a persistence.Append) error {
	txn := b.Txn
	cmd := a.Command
	key := cmd.Key()
	if err := checkFence(txn, key, a.Epoch); err != nil {
		return fmt.Errorf("memdb: append %s seq %d: %w", key, cmd.Seq, err)
	}
	s.log.mu.RLock()
	seqTaken, idTaken := b.logStaged(&cmd)
	seqTaken = seqTaken || s.log.find(key, cmd.Seq) != nil
	_, stored := s.log.ids[keyOf(&cmd)]
	idTaken = idTaken || stored
	s.log.mu.RUnlock()
	if seqTaken {
		return fmt.Errorf("memdb: append %s: seq %d already written: %w", key, cmd.Seq, persistence.ErrConflict)
	}
	if idTaken {
		return fmt.Errorf("memdb: append %s: command_id %q already written: %w", key, cmd.CommandID, persistence.ErrConflict)
	}
	if a.Gift {
		out, err := txn.First(tableGiftOutcomes, indexID, cmd.AppCode, cmd.RoomID, cmd.CommandID)
		if err != nil {
			return fmt.Errorf("memdb: append %s: %w", key, err)
		}
		if out != nil {
			return fmt.Errorf("memdb: append %s: gift %q was voided: %w", key, cmd.CommandID, persistence.ErrConflict)
		}
	}
	s.outbox.mu.RLock()
	defer s.outbox.mu.RUnlock()
	for i, e := range cmd.Events {
		taken := s.outbox.get(e.EventID) != nil || b.eventStaged(e.EventID)
		dup := slices.ContainsFunc(cmd.Events[:i], func(o persistence.Envelope) bool { return o.EventID == e.EventID })
		if taken || dup {
			return fmt.Errorf("memdb: append %s: event_id %q already written: %w", key, e.EventID, persistence.ErrConflict)
		}
	}
	return nil
}

// writeAppend writes a checked append: the fence, the gift's outcome and
// the snapshot in b's transaction, and the log row and one outbox row per
// event (its envelope is the log row's: one copy) staged in b, to be
// stored just before it commits.
func (s *Store) writeAppend(b *groupTxn, a persistence.Append) error {
	txn := b.Txn
	key := a.Command.Key()
	if err := raiseFence(txn, key, a.Epoch); err != nil {
		return fmt.Errorf("memdb: append %s seq %d: %w", key, a.Command.Seq, err)
	}
	cmd := a.Command
	if a.Gift {
		if err := txn.Insert(tableGiftOutcomes, &giftOutcome{AppCode: cmd.AppCode, RoomID: cmd.RoomID, CommandID: cmd.CommandID, Sent: true, CreatedAtMs: cmd.CreatedAtMs}); err != nil {
			return fmt.Errorf("memdb: append %s: %w", key, err)
		}
	}
	stored := cloneCommand(cmd)
	b.stageLog(&stored)
	for i := range stored.Events {
		e := &stored.Events[i]
		row := persistence.OutboxRow{
			Status:        persistence.OutboxPending,
			EventIndex:    i,
			CreatedAtMs:   e.CreatedAtMs,
			UpdatedAtMs:   e.CreatedAtMs,
			NextRetryAtMs: e.CreatedAtMs,
			MQStatus:      s.mqStatus,
		}
		if a.Lease != nil {
			row.LockedBy, row.LockUntilMs = a.Lease.Owner, a.Lease.UntilMs
		}
		b.stageOutbox(newOutboxEntry(e, row))
	}
	if a.Snapshot != nil {
		if err := saveSnapshot(txn, *a.Snapshot); err != nil {
			return fmt.Errorf("memdb: append %s: %w", key, err)
		}
	}
	return nil
}

func validateAppend(a persistence.Append) error {
	c := a.Command
	if c.AppCode == "" || c.RoomID == "" || c.CommandID == "" {
		return fmt.Errorf("%w: app_code, room_id and command_id are required", errInvalid)
	}
	for i, e := range c.Events {
		if e.EventID == "" {
			return fmt.Errorf("%w: event %d has no event_id", errInvalid, i)
		}
	}
	if a.Snapshot != nil && (a.Snapshot.AppCode == "" || a.Snapshot.RoomID == "") {
		return fmt.Errorf("%w: snapshot without app_code or room_id", errInvalid)
	}
	return nil
}

// LoadSnapshot implements persistence.RoomStore.
func (s *Store) LoadSnapshot(ctx context.Context, key persistence.RoomKey) (persistence.Snapshot, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.Snapshot{}, err
	}
	raw, err := s.db.Txn(false).First(tableSnapshots, indexID, key.AppCode, key.RoomID)
	if err != nil {
		return persistence.Snapshot{}, fmt.Errorf("memdb: load snapshot %s: %w", key, err)
	}
	if raw == nil {
		return persistence.Snapshot{}, fmt.Errorf("memdb: snapshot of %s: %w", key, persistence.ErrNotFound)
	}
	return cloneSnapshot(*raw.(*persistence.Snapshot)), nil
}

// LoadCommands implements persistence.RoomStore.
func (s *Store) LoadCommands(ctx context.Context, key persistence.RoomKey, afterSeq int64) ([]persistence.CommandRecord, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if afterSeq == math.MaxInt64 {
		return nil, nil
	}
	s.log.mu.RLock()
	defer s.log.mu.RUnlock()
	recs := s.log.after(key, afterSeq)
	if len(recs) == 0 {
		return nil, nil
	}
	out := make([]persistence.CommandRecord, len(recs))
	for i, rec := range recs {
		out[i] = cloneCommand(*rec)
	}
	return out, nil
}

// FindCommand implements persistence.RoomStore.
func (s *Store) FindCommand(ctx context.Context, key persistence.RoomKey, commandID string) (persistence.CommandRecord, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.CommandRecord{}, err
	}
	s.log.mu.RLock()
	defer s.log.mu.RUnlock()
	var rec *persistence.CommandRecord
	if seq, ok := s.log.ids[commandKey{key.AppCode, key.RoomID, commandID}]; ok {
		rec = s.log.find(key, seq)
	}
	if rec == nil {
		return persistence.CommandRecord{}, fmt.Errorf("memdb: command %q of %s: %w", commandID, key, persistence.ErrNotFound)
	}
	return cloneCommand(*rec), nil
}

// SaveSnapshot implements persistence.RoomStore.
func (s *Store) SaveSnapshot(ctx context.Context, snap persistence.Snapshot) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if snap.AppCode == "" || snap.RoomID == "" {
		return fmt.Errorf("%w: snapshot without app_code or room_id", errInvalid)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := saveSnapshot(txn, snap); err != nil {
		return fmt.Errorf("memdb: save snapshot %s: %w", snap.Key(), err)
	}
	txn.Commit()
	return nil
}

// saveSnapshot stores snap in txn unless the room already has one at the
// same or a later seq: an older activation must never roll a room back.
func saveSnapshot(txn *memdb.Txn, snap persistence.Snapshot) error {
	raw, err := txn.First(tableSnapshots, indexID, snap.AppCode, snap.RoomID)
	if err != nil {
		return err
	}
	if raw != nil && raw.(*persistence.Snapshot).Seq >= snap.Seq {
		return nil
	}
	stored := cloneSnapshot(snap)
	return txn.Insert(tableSnapshots, &stored)
}

// VoidGift implements persistence.RoomStore. The write transaction holds
// the single writer lock, so it and a gift's Append cannot interleave.
func (s *Store) VoidGift(ctx context.Context, key persistence.RoomKey, commandID string, nowMs int64) (bool, error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	if key.AppCode == "" || key.RoomID == "" || commandID == "" {
		return false, fmt.Errorf("%w: app_code, room_id and command_id are required", errInvalid)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableGiftOutcomes, indexID, key.AppCode, key.RoomID, commandID)
	if err != nil {
		return false, fmt.Errorf("memdb: void gift %s: %w", key, err)
	}
	if raw != nil {
		return raw.(*giftOutcome).Sent, nil
	}
	if err := txn.Insert(tableGiftOutcomes, &giftOutcome{AppCode: key.AppCode, RoomID: key.RoomID, CommandID: commandID, CreatedAtMs: nowMs}); err != nil {
		return false, fmt.Errorf("memdb: void gift %s: %w", key, err)
	}
	txn.Commit()
	return false, nil
}

// LoadCommandRange is LoadCommands bounded to the first limit rows: a
// client's read of the room's event log (ListRoomEvents) never copies
// the whole tail.
func (s *Store) LoadCommandRange(ctx context.Context, key persistence.RoomKey, afterSeq int64, limit int) ([]persistence.CommandRecord, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if afterSeq == math.MaxInt64 || limit <= 0 {
		return nil, nil
	}
	s.log.mu.RLock()
	defer s.log.mu.RUnlock()
	recs := s.log.after(key, afterSeq)
	recs = recs[:min(len(recs), limit)]
	out := make([]persistence.CommandRecord, len(recs))
	for i, rec := range recs {
		out[i] = cloneCommand(*rec)
	}
	return out, nil
}
