package mysql

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hyapp/roomcell/persistence"
)

// Column sizes of schema/room, in characters. Append checks them up front:
// an ID cut by a lax server could collide with another one.
const (
	maxAppCode     = 64
	maxRoomID      = 128
	maxCommandID   = 128
	maxCommandType = 64
	maxEventID     = 255
	maxEventType   = 64
	maxLastError   = 1024
	maxLockedBy    = 128
)

// errInvalid marks an Append the tables cannot hold.
var errInvalid = errors.New("mysql: invalid append")

// pendingAppend is one Append ready to be written: validated, its
// envelopes encoded once (they go to the log and to the outbox).
type pendingAppend struct {
	a         persistence.Append
	envelopes [][]byte
	events    []byte // JSON array of envelopes, for room_command_log.events
	err       error  // the append's own result, set by the writer
}

func checkLen(field, v string, maxChars int, required bool) error {
	if v == "" && required {
		return fmt.Errorf("%w: %s is required", errInvalid, field)
	}
	if len(v) > maxChars && utf8.RuneCountInString(v) > maxChars {
		return fmt.Errorf("%w: %s is longer than %d characters", errInvalid, field, maxChars)
	}
	return nil
}

// checkEventLen is checkLen for a field of event i; the field's name is
// formatted only for an error.
func checkEventLen(i int, field, v string, maxChars int, required bool) error {
	if v == "" && required || len(v) > maxChars {
		return checkLen(fmt.Sprintf("event %d %s", i, field), v, maxChars, required)
	}
	return nil
}

func prepareAppend(a persistence.Append) (*pendingAppend, error) {
	c := a.Command
	if err := errors.Join(
		checkLen("app_code", c.AppCode, maxAppCode, true),
		checkLen("room_id", c.RoomID, maxRoomID, true),
		checkLen("command_id", c.CommandID, maxCommandID, true),
		checkLen("command_type", c.CommandType, maxCommandType, false),
	); err != nil {
		return nil, err
	}
	if a.Snapshot != nil {
		if err := errors.Join(
			checkLen("snapshot app_code", a.Snapshot.AppCode, maxAppCode, true),
			checkLen("snapshot room_id", a.Snapshot.RoomID, maxRoomID, true),
		); err != nil {
			return nil, err
		}
	}
	if a.Epoch < 0 {
		return nil, fmt.Errorf("%w: negative epoch %d", errInvalid, a.Epoch)
	}
	// The envelopes are written once, into the log's events array; each
	// outbox row's envelope is its piece of that array.
	p := &pendingAppend{a: a, envelopes: make([][]byte, len(c.Events))}
	spans := make([][2]int, 0, 4)
	events := bytes.NewBuffer(make([]byte, 0, eventsSize(c.Events)))
	events.WriteByte('[')
	for i, e := range c.Events {
		if err := errors.Join(
			checkEventLen(i, "event_id", e.EventID, maxEventID, true),
			checkEventLen(i, "event_type", e.EventType, maxEventType, false),
			checkEventLen(i, "app_code", e.AppCode, maxAppCode, false),
			checkEventLen(i, "room_id", e.RoomID, maxRoomID, false),
		); err != nil {
			return nil, err
		}
		if i > 0 {
			events.WriteByte(',')
		}
		start := events.Len()
		if !writeEnvelope(events, e) {
			// The payload is not valid JSON: encoding/json says why.
			events.Truncate(start)
			b, err := encodeEnvelope(e)
			if err != nil {
				return nil, fmt.Errorf("%w: event %s: %w", errInvalid, e.EventID, err)
			}
			events.Write(b)
		}
		spans = append(spans, [2]int{start, events.Len()})
	}
	events.WriteByte(']')
	p.events = events.Bytes()
	for i, sp := range spans {
		p.envelopes[i] = p.events[sp[0]:sp[1]:sp[1]]
	}
	return p, nil
}

// eventsSize is the length of the events array when no string needs an
// escape (two int64s take at most 20 bytes each).
func eventsSize(es []persistence.Envelope) int {
	n := len("[]")
	for _, e := range es {
		n += envelopeKeys + len(e.EventID) + len(e.EventType) + len(e.AppCode) + len(e.RoomID) +
			len(e.CommandID) + len(e.RequestID) + len(e.TraceParent) + len(e.Payload) + 2*20
	}
	return n
}

// envelopeKeys is what writeEnvelope adds to an envelope's values: keys,
// quotes, separators and braces.
const envelopeKeys = len(`{"event_id":"","event_type":"","app_code":"","room_id":"","room_seq":,"command_id":"",` +
	`"request_id":"","traceparent":"","created_at_ms":,"payload":null},`)

// writeEnvelope writes encodeEnvelope(e) to buf without reflection: the
// same bytes (TestWriteEnvelopeMatchesEncoder). It reports false, having
// written part of it, when the payload is not valid JSON.
func writeEnvelope(buf *bytes.Buffer, e persistence.Envelope) bool {
	str := func(key, v string) {
		buf.WriteString(key)
		buf.Write(appendJSONString(buf.AvailableBuffer(), v))
	}
	num := func(key string, v int64) {
		buf.WriteString(key)
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), v, 10))
	}
	str(`{"event_id":`, e.EventID)
	str(`,"event_type":`, e.EventType)
	str(`,"app_code":`, e.AppCode)
	str(`,"room_id":`, e.RoomID)
	num(`,"room_seq":`, e.RoomSeq)
	str(`,"command_id":`, e.CommandID)
	if e.RequestID != "" {
		str(`,"request_id":`, e.RequestID)
	}
	if e.TraceParent != "" {
		str(`,"traceparent":`, e.TraceParent)
	}
	num(`,"created_at_ms":`, e.CreatedAtMs)
	buf.WriteString(`,"payload":`)
	if e.Payload == nil {
		buf.WriteString("null")
	} else if json.Compact(buf, e.Payload) != nil {
		return false
	}
	buf.WriteByte('}')
	return true
}

// appendJSONString appends s quoted as encoding/json does without HTML
// escaping: \", \\, \b, \f, \n, \r, \t, \u00XX for other control
// bytes, \ufffd for invalid UTF-8, \u2028 and \u2029.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// encodeEnvelope is json.Marshal without HTML escaping: the payload the
// grain encoded is stored as it came (encoding/json only compacts it).
// writeEnvelope writes the same bytes; this is the reference, and the
// wording of an invalid payload's error.
func encodeEnvelope(e persistence.Envelope) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeEnvelope reverses encodeEnvelope. A nil payload was encoded as
// null; it comes back nil.
func decodeEnvelope(b []byte) (persistence.Envelope, error) {
	var e persistence.Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, err
	}
	if string(e.Payload) == "null" {
		e.Payload = nil
	}
	return e, nil
}

func decodeEvents(b []byte) ([]persistence.Envelope, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, nil
	}
	out := make([]persistence.Envelope, len(raws))
	for i, r := range raws {
		e, err := decodeEnvelope(r)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// Append implements persistence.RoomStore. With group commit on, the
// append waits for the next shared transaction and returns after it
// committed; either way nothing is acknowledged before its COMMIT. A
// failed COMMIT is ErrUnavailable: the write may then have happened (the
// grain reloads, and a retry of the same seq gets ErrConflict).
func (s *Store) Append(ctx context.Context, a persistence.Append) error {
	if err := ready(ctx); err != nil {
		return err
	}
	p, err := prepareAppend(a)
	if err != nil {
		return err
	}
	if s.gc != nil {
		return s.gc.append(ctx, p)
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	s.writeBatch(ctx, []*pendingAppend{p})
	return p.err
}

// maxDeadlockRetries bounds the re-runs of a transaction InnoDB chose as a
// deadlock victim (a lock wait timeout is not re-run: the lock is held by
// someone else, and waiting again for the same lock would hold the whole
// batch). Only two writers of one room can deadlock, so a re-run
// meets the winner's committed row and fails cleanly with a duplicate key.
const maxDeadlockRetries = 3

// writeBatch writes every append of ps and sets each one's err. The fast
// path is one transaction with multi-row INSERTs for the whole batch. If
// the server rejects a statement (a fenced seq or epoch, a taken
// command_id, a row lock held past innodb_lock_wait_timeout), the
// batch is written again with a SAVEPOINT per append, so only the
// offending appends roll back; if even that transaction is lost to a
// deadlock, each append gets a transaction of its own. An error of the
// connection or of COMMIT fails every append of that transaction with
// ErrUnavailable: none of them is acknowledged.
func (s *Store) writeBatch(ctx context.Context, ps []*pendingAppend) {
	sortAppends(ps)
	var err error
	for attempt := 0; ; attempt++ {
		if err = s.writeTx(ctx, ps, nil); err == nil {
			setAll(ps, nil)
			return
		}
		if !isTxDeadlock(err) || attempt >= maxDeadlockRetries || ctx.Err() != nil {
			break
		}
	}
	if len(ps) == 1 {
		ps[0].err = s.wrapAppend(ps[0], err)
		return
	}
	if !isServerError(err) && !isTxDeadlock(err) && !isLockWait(err) {
		setAll(ps, s.wrap(fmt.Sprintf("append (batch of %d)", len(ps)), err))
		return
	}
	if s.writeIsolated(ctx, ps) {
		return
	}
	for _, p := range ps {
		p.err = nil
		s.writeBatch(ctx, []*pendingAppend{p})
	}
}

// sortAppends puts ps in the one lock order of every writer: two batches
// that touch the same rooms queue behind each other instead of
// deadlocking.
func sortAppends(ps []*pendingAppend) {
	slices.SortFunc(ps, func(x, y *pendingAppend) int {
		a, b := x.a.Command, y.a.Command
		return cmp.Or(strings.Compare(a.AppCode, b.AppCode), strings.Compare(a.RoomID, b.RoomID), cmp.Compare(a.Seq, b.Seq))
	})
}

// writeShared writes ps and the published marks of earlier events in one
// transaction, the marks first. If that transaction fails, the marks are
// written on their own and the appends take writeBatch's way (retries,
// savepoints), so no mark fails an append and no append fails a mark.
func (s *Store) writeShared(ctx context.Context, ps []*pendingAppend, marks []*queuedMark) {
	if len(marks) == 0 {
		s.writeBatch(ctx, ps)
		return
	}
	sortAppends(ps)
	if err := s.writeTx(ctx, ps, markStatements(marks)); err == nil {
		setAll(ps, nil)
		return
	}
	s.writeMarks(ctx, marks)
	s.writeBatch(ctx, ps)
}

func setAll(ps []*pendingAppend, err error) {
	for _, p := range ps {
		p.err = err
	}
}

// writeTx writes ps in one transaction with one multi-row statement per
// table (more if the rows are large), after the statements of first.
func (s *Store) writeTx(ctx context.Context, ps []*pendingAppend, first []statement) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, st := range slices.Concat(first, buildStatements(ps, s.mqStatus)) {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	return tx.Commit()
}

// writeIsolated writes ps in one transaction, each append behind its own
// SAVEPOINT. It reports false (and writes nothing) when the transaction
// was lost to a deadlock and the caller must fall back further.
func (s *Store) writeIsolated(ctx context.Context, ps []*pendingAppend) bool {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		setAll(ps, s.wrap("append", err))
		return true
	}
	defer func() { _ = tx.Rollback() }()
	for _, p := range ps {
		p.err = nil
		if _, err := tx.ExecContext(ctx, "SAVEPOINT a"); err != nil {
			setAll(ps, s.wrap("append", err))
			return true
		}
		for _, st := range buildStatements([]*pendingAppend{p}, s.mqStatus) {
			_, err := tx.ExecContext(ctx, st.query, st.args...)
			if err == nil {
				continue
			}
			if isTxDeadlock(err) {
				return false
			}
			// A lock wait timeout rolls back only the statement (with
			// innodb_rollback_on_timeout off, the default): the room
			// whose row another transaction holds fails alone.
			if !isServerError(err) && !isLockWait(err) {
				setAll(ps, s.wrap("append", err))
				return true
			}
			p.err = s.wrapAppend(p, err)
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT a"); err != nil {
				setAll(ps, s.wrap("append", err))
				return true
			}
			break
		}
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := tx.Commit(); err != nil {
		for _, p := range ps {
			if p.err == nil {
				p.err = s.wrap("append: commit", err)
			}
		}
	}
	return true
}

type statement struct {
	query string
	args  []any
}

// maxStatementBytes keeps a multi-row INSERT far below max_allowed_packet
// (MariaDB's default is 16 MiB) however large the snapshots are.
const maxStatementBytes = 1 << 20

// rowsBuilder accumulates the rows of one multi-row statement, value by
// value. Strings and bytes go as ? parameters, which the driver escapes.
// Integers and constants are written into the text as the literals the
// driver's interpolation (InterpolateParams, driverConfig) would put there:
// the server gets the same statement, and the integers are neither boxed
// nor converted as parameters.
type rowsBuilder struct {
	head, tail string
	// rows, rowArgs and rowText size a statement when it starts: the rows
	// still to come, and the parameters and about the text of one row.
	rows, rowArgs, rowText int

	out   []statement
	sb    strings.Builder
	args  []any
	bytes int
	sep   bool // the row has a value: the next one needs a comma
}

// maxIntText is the longest int64 literal.
const maxIntText = len("-9223372036854775808")

// row starts a row whose values take about size bytes, closing the
// statement first if the row would take it past maxStatementBytes. The
// row's values follow (param, ints, sql), then end.
func (b *rowsBuilder) row(size int) *rowsBuilder {
	if b.sb.Len() > 0 && b.bytes+size > maxStatementBytes {
		b.flush()
	}
	if b.sb.Len() == 0 {
		rows := max(b.rows, 1)
		b.sb.Grow(len(b.head) + rows*(b.rowText+1) + len(b.tail))
		b.args = make([]any, 0, rows*b.rowArgs)
		b.sb.WriteString(b.head)
	} else {
		b.sb.WriteByte(',')
	}
	b.rows--
	b.sb.WriteByte('(')
	b.sep = false
	b.bytes += size
	return b
}

func (b *rowsBuilder) next() {
	if b.sep {
		b.sb.WriteByte(',')
	}
	b.sep = true
}

// param adds values sent as parameters.
func (b *rowsBuilder) param(vs ...any) *rowsBuilder {
	for range vs {
		b.next()
		b.sb.WriteByte('?')
	}
	b.args = append(b.args, vs...)
	return b
}

// ints adds integers as literals.
func (b *rowsBuilder) ints(vs ...int64) *rowsBuilder {
	for _, v := range vs {
		b.next()
		var d [maxIntText]byte
		b.sb.Write(strconv.AppendInt(d[:0], v, 10))
	}
	return b
}

// sql adds constant SQL values; never caller input.
func (b *rowsBuilder) sql(vs ...string) *rowsBuilder {
	for _, v := range vs {
		b.next()
		b.sb.WriteString(v)
	}
	return b
}

func (b *rowsBuilder) end() { b.sb.WriteByte(')') }

func (b *rowsBuilder) flush() {
	if b.sb.Len() == 0 {
		return
	}
	b.sb.WriteString(b.tail)
	b.out = append(b.out, statement{query: b.sb.String(), args: b.args})
	b.sb.Reset()
	b.args = nil
	b.bytes = 0
}

const (
	insertCommandLog = "INSERT INTO room_command_log (app_code, room_id, seq, command_id, command_type, request_hash, reply, events, created_at_ms, sealed) VALUES "
	insertGiftSent   = "INSERT INTO room_gift_outcomes (app_code, room_id, command_id, outcome, created_at_ms) VALUES "
	insertOutbox     = "INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_type, envelope, status, retry_count, locked_by, lock_until_ms, next_retry_at_ms, created_at_ms, updated_at_ms, event_index) VALUES "
	insertOutboxMQ   = "INSERT INTO room_outbox_mq (event_id, app_code, room_id, room_seq, event_index, created_at_ms) VALUES "
	upsertSnapshot   = "INSERT INTO room_snapshots (app_code, room_id, seq, state, updated_at_ms) VALUES "
	// Only a newer seq replaces a snapshot. MySQL assigns left to right and
	// later expressions see earlier assignments, so seq goes last. VALUES()
	// is deprecated on MySQL 8.0.20+ but it is the one spelling MariaDB
	// shares.
	snapshotNewerOnly = " ON DUPLICATE KEY UPDATE" +
		" state = IF(VALUES(seq) > seq, VALUES(state), state)," +
		" updated_at_ms = IF(VALUES(seq) > seq, VALUES(updated_at_ms), updated_at_ms)," +
		" seq = GREATEST(seq, VALUES(seq))"
)

// buildStatements turns ps into the fence, log, outbox and snapshot
// writes. The epoch fence goes first, then the log: a stale epoch or a
// fenced seq fails there, before any other row of the append is written.
// mqStatus is the store's fanout setting: with OutboxMQPending each outbox
// row also gets its room_outbox_mq row (MQ-pending), with OutboxMQNone
// none.
func buildStatements(ps []*pendingAppend, mqStatus string) []statement {
	// An append's room is a parameter of up to three statements: boxed once.
	keys := make([]rowKey, len(ps))
	events, gifts, snaps := 0, 0, 0
	for i, p := range ps {
		c := p.a.Command
		keys[i] = rowKey{app: c.AppCode, room: c.RoomID}
		events += len(c.Events)
		if p.a.Gift {
			gifts++
		}
		if p.a.Snapshot != nil {
			snaps++
		}
	}
	fences := fenceStatement(ps, keys)
	logRows := rowsBuilder{head: insertCommandLog, rows: len(ps), rowArgs: 8, rowText: len("(?,?,,?,?,?,?,?,,?)") + 2*maxIntText}
	giftRows := rowsBuilder{head: insertGiftSent, rows: gifts, rowArgs: 3, rowText: len("(?,?,?,'sent',)") + maxIntText}
	outboxRows := rowsBuilder{head: insertOutbox, rows: events, rowArgs: 6,
		rowText: len("(?,?,?,,?,?,'pending',0,?,,,,,)") + 6*maxIntText}
	mqOn := mqStatus == persistence.OutboxMQPending
	mqRows := rowsBuilder{head: insertOutboxMQ, rowArgs: 3, rowText: len("(?,?,?,,,)") + 3*maxIntText}
	if mqOn {
		mqRows.rows = events
	}
	snapRows := rowsBuilder{head: upsertSnapshot, tail: snapshotNewerOnly, rows: snaps, rowArgs: 3, rowText: len("(?,?,,?,)") + 2*maxIntText}
	for i, p := range ps {
		c, k := p.a.Command, keys[i]
		reply := c.Reply
		if reply == nil {
			reply = []byte{}
		}
		var commandID any = c.CommandID
		var sealed any // NULL for the rows without
		if len(c.Sealed) > 0 {
			sealed = c.Sealed
		}
		logRows.row(len(reply)+len(p.events)+len(c.Sealed)+192).param(k.app, k.room).ints(c.Seq).
			param(commandID, c.CommandType, c.RequestHash, reply, p.events).ints(c.CreatedAtMs).param(sealed).end()
		if p.a.Gift {
			giftRows.row(256).param(k.app, k.room, commandID).sql("'sent'").ints(c.CreatedAtMs).end()
		}
		var lockedBy any
		var lockUntil int64
		if l := p.a.Lease; l != nil {
			lockedBy, lockUntil = l.Owner, l.UntilMs
		}
		for i, e := range c.Events {
			outboxRows.row(len(p.envelopes[i])+160).param(e.EventID, reuse(e.AppCode, k.app), reuse(e.RoomID, k.room)).ints(e.RoomSeq).
				param(e.EventType, p.envelopes[i]).sql("'pending'", "0").param(lockedBy).
				ints(lockUntil, e.CreatedAtMs, e.CreatedAtMs, e.CreatedAtMs, int64(i)).end()
			if mqOn {
				mqRows.row(len(e.EventID)+len(e.AppCode)+len(e.RoomID)+64).param(e.EventID, reuse(e.AppCode, k.app), reuse(e.RoomID, k.room)).
					ints(e.RoomSeq, int64(i), e.CreatedAtMs).end()
			}
		}
		if sn := p.a.Snapshot; sn != nil {
			state := sn.State
			if state == nil {
				state = []byte{}
			}
			snapRows.row(len(state)+64).param(reuse(sn.AppCode, k.app), reuse(sn.RoomID, k.room)).ints(sn.Seq).
				param(state).ints(sn.UpdatedAtMs).end()
		}
	}
	logRows.flush()
	giftRows.flush()
	outboxRows.flush()
	mqRows.flush()
	snapRows.flush()
	// A voided gift fails on its outcome row right after the log, before
	// any outbox row is written.
	return slices.Concat(fences, logRows.out, giftRows.out, outboxRows.out, mqRows.out, snapRows.out)
}

// rowKey is an append's app_code and room_id as parameters.
type rowKey struct{ app, room any }

// reuse is boxed when it holds v, else v: an event or a snapshot names
// its command's room (the grain never writes another), but the columns
// take what it says.
func reuse(v string, boxed any) any {
	if s, _ := boxed.(string); s == v {
		return boxed
	}
	return v
}

// LoadSnapshot implements persistence.RoomStore.
func (s *Store) LoadSnapshot(ctx context.Context, key persistence.RoomKey) (persistence.Snapshot, error) {
	if err := ready(ctx); err != nil {
		return persistence.Snapshot{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	snap := persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID}
	err := s.db.QueryRowContext(ctx,
		"SELECT seq, state, updated_at_ms FROM room_snapshots WHERE app_code = ? AND room_id = ?",
		key.AppCode, key.RoomID).Scan(&snap.Seq, &snap.State, &snap.UpdatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Snapshot{}, fmt.Errorf("mysql: snapshot of %s: %w", key, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.Snapshot{}, s.wrap("load snapshot "+key.String(), err)
	}
	return snap, nil
}

const commandColumns = "seq, command_id, command_type, request_hash, reply, events, created_at_ms, sealed"

func scanCommand(key persistence.RoomKey, sc interface{ Scan(...any) error }) (persistence.CommandRecord, error) {
	c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID}
	var events []byte
	if err := sc.Scan(&c.Seq, &c.CommandID, &c.CommandType, &c.RequestHash, &c.Reply, &events, &c.CreatedAtMs, &c.Sealed); err != nil {
		return c, err
	}
	if len(c.Reply) == 0 {
		c.Reply = nil
	}
	if len(c.Sealed) == 0 {
		c.Sealed = nil
	}
	var err error
	if c.Events, err = decodeEvents(events); err != nil {
		return c, fmt.Errorf("mysql: %s seq %d: decode events: %w", key, c.Seq, err)
	}
	return c, nil
}

// LoadCommands implements persistence.RoomStore.
func (s *Store) LoadCommands(ctx context.Context, key persistence.RoomKey, afterSeq int64) ([]persistence.CommandRecord, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+commandColumns+" FROM room_command_log WHERE app_code = ? AND room_id = ? AND seq > ? ORDER BY seq",
		key.AppCode, key.RoomID, afterSeq)
	if err != nil {
		return nil, s.wrap("load commands "+key.String(), err)
	}
	defer rows.Close()
	var out []persistence.CommandRecord
	for rows.Next() {
		c, err := scanCommand(key, rows)
		if err != nil {
			return nil, s.wrap("load commands "+key.String(), err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("load commands "+key.String(), err)
	}
	return out, nil
}

// LoadCommandRange is LoadCommands bounded to the first limit rows: a
// client's read of the room's event log (ListRoomEvents) never copies
// the whole tail.
func (s *Store) LoadCommandRange(ctx context.Context, key persistence.RoomKey, afterSeq int64, limit int) ([]persistence.CommandRecord, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		"SELECT "+commandColumns+" FROM room_command_log WHERE app_code = ? AND room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
		key.AppCode, key.RoomID, afterSeq, limit)
	if err != nil {
		return nil, s.wrap("load command range "+key.String(), err)
	}
	defer rows.Close()
	out := make([]persistence.CommandRecord, 0, limit)
	for rows.Next() {
		c, err := scanCommand(key, rows)
		if err != nil {
			return nil, s.wrap("load command range "+key.String(), err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("load command range "+key.String(), err)
	}
	return out, nil
}

// FindCommand implements persistence.RoomStore.
func (s *Store) FindCommand(ctx context.Context, key persistence.RoomKey, commandID string) (persistence.CommandRecord, error) {
	if err := ready(ctx); err != nil {
		return persistence.CommandRecord{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	row := s.db.QueryRowContext(ctx,
		"SELECT "+commandColumns+" FROM room_command_log WHERE app_code = ? AND room_id = ? AND command_id = ?",
		key.AppCode, key.RoomID, commandID)
	c, err := scanCommand(key, row)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.CommandRecord{}, fmt.Errorf("mysql: command %q of %s: %w", commandID, key, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.CommandRecord{}, s.wrap("find command "+key.String(), err)
	}
	return c, nil
}

// SaveSnapshot implements persistence.RoomStore.
func (s *Store) SaveSnapshot(ctx context.Context, snap persistence.Snapshot) error {
	if err := ready(ctx); err != nil {
		return err
	}
	if err := errors.Join(
		checkLen("snapshot app_code", snap.AppCode, maxAppCode, true),
		checkLen("snapshot room_id", snap.RoomID, maxRoomID, true),
	); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	state := snap.State
	if state == nil {
		state = []byte{}
	}
	// On a connection of its own: a snapshot over the server's
	// max_allowed_packet is refused and its connection closed by the
	// server, and that connection must not go back to the pool for the
	// next append to fail on.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.wrap("save snapshot "+snap.Key().String(), err)
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, upsertSnapshot+"(?,?,?,?,?)"+snapshotNewerOnly,
		snap.AppCode, snap.RoomID, snap.Seq, state, snap.UpdatedAtMs)
	if err != nil {
		if isPacketTooBig(err) {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closed, not pooled
		}
		return s.wrap("save snapshot "+snap.Key().String(), err)
	}
	return nil
}

// VoidGift implements persistence.RoomStore. The outcome row's primary
// key is the whole fence: this INSERT and a gift append's INSERT of the
// same key cannot both commit, so no locking read is needed.
func (s *Store) VoidGift(ctx context.Context, key persistence.RoomKey, commandID string, nowMs int64) (bool, error) {
	if err := ready(ctx); err != nil {
		return false, err
	}
	if err := errors.Join(
		checkLen("app_code", key.AppCode, maxAppCode, true),
		checkLen("room_id", key.RoomID, maxRoomID, true),
		checkLen("command_id", commandID, maxCommandID, true),
	); err != nil {
		return false, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	if _, err := s.db.ExecContext(ctx,
		"INSERT IGNORE INTO room_gift_outcomes (app_code, room_id, command_id, outcome, created_at_ms) VALUES (?,?,?,'void',?)",
		key.AppCode, key.RoomID, commandID, nowMs); err != nil {
		return false, s.wrap("void gift "+key.String(), err)
	}
	var outcome string
	err := s.db.QueryRowContext(ctx,
		"SELECT outcome FROM room_gift_outcomes WHERE app_code = ? AND room_id = ? AND command_id = ?",
		key.AppCode, key.RoomID, commandID).Scan(&outcome)
	if err != nil {
		return false, s.wrap("void gift "+key.String(), err)
	}
	return outcome == "sent", nil
}
