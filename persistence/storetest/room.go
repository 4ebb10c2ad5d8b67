package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunRoomStore runs the persistence.RoomStore contract (command log,
// snapshots and the seq/command_id fences; RunOutboxStore has the outbox).
// newStore must return an empty store for each call and arrange its Close
// and any teardown with t.Cleanup; every subtest gets its own store.
func RunRoomStore(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	t.Helper()
	runContract(t, newStore, []contractCase[persistence.Store]{
		{"AppendLoadRoundTrip", testAppendLoadRoundTrip},
		{"SealedStaysWithTheRow", testSealedStaysWithTheRow},
		{"ReturnedValuesDoNotAlias", testReturnedValuesDoNotAlias},
		{"LoadCommandsOrderAndAfterSeq", testLoadCommandsOrderAndAfterSeq},
		{"FindCommand", testFindCommand},
		{"DuplicateSeqConflictWritesNothing", testDuplicateSeqConflict},
		{"DuplicateCommandIDConflictWritesNothing", testDuplicateCommandIDConflict},
		{"AppendSnapshotNewerOnly", testAppendSnapshotNewerOnly},
		{"SaveSnapshotNewerOnly", testSaveSnapshotNewerOnly},
		{"CancelledContextWritesNothing", testCancelledContext},
		{"NotFound", testNotFound},
		{"RoomsIsolated", testRoomsIsolated},
		{"ConcurrentAppendSameSeqFences", testConcurrentAppendSameSeq},
		{"ConcurrentAppendSameCommandIDFences", testConcurrentAppendSameCommandID},
		{"GiftVoidFence", testGiftVoidFence},
		{"ConcurrentGiftAppendAndVoidOneOutcome", testConcurrentGiftAppendAndVoid},
	})
}

var roomA = persistence.RoomKey{AppCode: "app1", RoomID: "room-a"}

// event builds an envelope; the payload is compact JSON so a backend that
// stores it in a JSON column returns the same bytes.
func event(key persistence.RoomKey, seq int64, commandID, eventID string, createdAtMs int64) persistence.Envelope {
	return persistence.Envelope{
		EventID:     eventID,
		EventType:   "RoomUserJoined",
		AppCode:     key.AppCode,
		RoomID:      key.RoomID,
		RoomSeq:     seq,
		CommandID:   commandID,
		RequestID:   "req-" + commandID,
		CreatedAtMs: createdAtMs,
		Payload:     json.RawMessage(fmt.Sprintf(`{"event":%q,"seat":%d}`, eventID, seq)),
	}
}

// command builds a command log row at seq with one event per eventID, all
// created at createdAtMs. The reply holds non-UTF-8 bytes on purpose: the
// grain may store encoded protobuf there.
func command(key persistence.RoomKey, seq int64, commandID string, createdAtMs int64, eventIDs ...string) persistence.CommandRecord {
	c := persistence.CommandRecord{
		AppCode:     key.AppCode,
		RoomID:      key.RoomID,
		Seq:         seq,
		CommandID:   commandID,
		CommandType: "JoinRoom",
		RequestHash: fmt.Sprintf("%064x", len(commandID)*1000003+int(seq)),
		Reply:       []byte(fmt.Sprintf("\x00\xff\x01reply-%s-%d", commandID, seq)),
		CreatedAtMs: createdAtMs,
	}
	for _, id := range eventIDs {
		c.Events = append(c.Events, event(key, seq, commandID, id, createdAtMs))
	}
	return c
}

func snapshot(key persistence.RoomKey, seq, updatedAtMs int64) *persistence.Snapshot {
	return &persistence.Snapshot{
		AppCode:     key.AppCode,
		RoomID:      key.RoomID,
		Seq:         seq,
		State:       []byte(fmt.Sprintf("\x00\xfestate@%d", seq)),
		UpdatedAtMs: updatedAtMs,
	}
}

func mustAppend(t *testing.T, s persistence.Store, a persistence.Append) {
	t.Helper()
	if err := s.Append(t.Context(), a); err != nil {
		t.Fatalf("Append seq %d command %q: %v", a.Command.Seq, a.Command.CommandID, err)
	}
}

func mustNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

// normCommand treats nil and empty slices alike: backends differ there and
// callers must not care.
func normCommand(c persistence.CommandRecord) persistence.CommandRecord {
	if len(c.Reply) == 0 {
		c.Reply = nil
	}
	if len(c.Sealed) == 0 {
		c.Sealed = nil
	}
	if len(c.Events) == 0 {
		c.Events = nil
	}
	events := make([]persistence.Envelope, len(c.Events))
	for i, e := range c.Events {
		events[i] = normEnvelope(e)
	}
	if c.Events != nil {
		c.Events = events
	}
	return c
}

func normEnvelope(e persistence.Envelope) persistence.Envelope {
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	return e
}

func wantCommand(t *testing.T, what string, got, want persistence.CommandRecord) {
	t.Helper()
	if !reflect.DeepEqual(normCommand(got), normCommand(want)) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func wantSnapshot(t *testing.T, what string, got persistence.Snapshot, want *persistence.Snapshot) {
	t.Helper()
	if !reflect.DeepEqual(got, *want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, *want)
	}
}

func seqs(recs []persistence.CommandRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func testAppendLoadRoundTrip(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	c1 := command(roomA, 1, "cmd-1", 1000, "ev-1a", "ev-1b")
	c1.Events[1].EventType = "RoomMicTaken"
	// request_id is optional on the wire; a command may have no events.
	c1.Events[1].RequestID = ""
	// A traced command's events carry its traceparent, in the log and in
	// the outbox row a sender links its send from; an untraced one's
	// (ev-1b) come back without one.
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c1.Events[0].TraceParent = traceparent
	c2 := command(roomA, 2, "cmd-2", 1100)
	snap := snapshot(roomA, 2, 1100)
	mustAppend(t, s, persistence.Append{Command: c1})
	mustAppend(t, s, persistence.Append{Command: c2, Snapshot: snap})

	got, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	if len(got) != 2 {
		t.Fatalf("LoadCommands: got %d rows, want 2", len(got))
	}
	wantCommand(t, "LoadCommands[0]", got[0], c1)
	wantCommand(t, "LoadCommands[1]", got[1], c2)

	found, err := s.FindCommand(ctx, roomA, "cmd-1")
	mustNoErr(t, "FindCommand", err)
	wantCommand(t, "FindCommand", found, c1)
	for id, want := range map[string]string{"ev-1a": traceparent, "ev-1b": ""} {
		row, err := s.GetOutbox(ctx, id)
		mustNoErr(t, "GetOutbox", err)
		if row.Envelope.TraceParent != want {
			t.Fatalf("outbox row %s traceparent %q, want %q", id, row.Envelope.TraceParent, want)
		}
	}

	gotSnap, err := s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "LoadSnapshot", gotSnap, snap)
}

// A row's sealed part comes back with the row (LoadCommands,
// FindCommand), apart from its events: their payloads do not hold it.
func testSealedStaysWithTheRow(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	c1 := command(roomA, 1, "cmd-1", 1000, "ev-1")
	c1.Sealed = []byte(`{"salt":"00ff","mac":"sealed-check-value"}`)
	c2 := command(roomA, 2, "cmd-2", 1100, "ev-2")
	mustAppend(t, s, persistence.Append{Command: c1})
	mustAppend(t, s, persistence.Append{Command: c2})
	got, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	if len(got) != 2 || string(got[0].Sealed) != string(c1.Sealed) || got[1].Sealed != nil {
		t.Fatalf("LoadCommands sealed parts: %q", [][]byte{got[0].Sealed, got[len(got)-1].Sealed})
	}
	found, err := s.FindCommand(ctx, roomA, "cmd-1")
	mustNoErr(t, "FindCommand", err)
	if string(found.Sealed) != string(c1.Sealed) {
		t.Fatalf("FindCommand sealed %q", found.Sealed)
	}
	for _, e := range got[0].Events {
		if strings.Contains(string(e.Payload), "sealed-check-value") {
			t.Fatalf("the sealed part is in the event %s", e.Payload)
		}
	}
}

func testReturnedValuesDoNotAlias(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	c := command(roomA, 1, "cmd-1", 1000, "ev-1")
	want := command(roomA, 1, "cmd-1", 1000, "ev-1")
	snap := snapshot(roomA, 1, 1000)
	mustAppend(t, s, persistence.Append{Command: c, Snapshot: snap})

	// Mutate what was handed in...
	c.Reply[0] = 'X'
	c.Events[0].Payload[0] = 'X'
	c.Events[0].EventType = "Mutated"
	snap.State[0] = 'X'

	// ...and what came out.
	got, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	got[0].Reply[0] = 'Y'
	got[0].Events[0].Payload[0] = 'Y'
	got[0].Events[0].EventType = "Mutated"
	found, err := s.FindCommand(ctx, roomA, "cmd-1")
	mustNoErr(t, "FindCommand", err)
	wantCommand(t, "FindCommand after mutating inputs and results", found, want)
	found.Reply[0] = 'Z'
	found.Events[0].Payload[0] = 'Z'

	again, err := s.LoadCommands(ctx, roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	wantCommand(t, "LoadCommands after mutating results", again[0], want)

	gotSnap, err := s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	gotSnap.State[0] = 'Y'
	gotSnap, err = s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "LoadSnapshot after mutations", gotSnap, snapshot(roomA, 1, 1000))

	row := getOutbox(t, s, "ev-1")
	row.Envelope.Payload[0] = 'Y'
	pending, err := s.ListPendingOutbox(ctx, 10)
	mustNoErr(t, "ListPendingOutbox", err)
	pending[0].Envelope.Payload[0] = 'Y'
	if got := getOutbox(t, s, "ev-1").Envelope; !reflect.DeepEqual(got, want.Events[0]) {
		t.Fatalf("outbox envelope after mutations:\n got %+v\nwant %+v", got, want.Events[0])
	}
}

func testLoadCommandsOrderAndAfterSeq(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	// Appended out of order: the store orders by seq, not by arrival.
	for _, seq := range []int64{3, 1, 5, 2, 4} {
		mustAppend(t, s, persistence.Append{Command: command(roomA, seq, fmt.Sprintf("cmd-%d", seq), 1000+seq)})
	}
	for _, tc := range []struct {
		after int64
		want  []int64
	}{
		{0, []int64{1, 2, 3, 4, 5}},
		{2, []int64{3, 4, 5}},
		{4, []int64{5}},
		{5, nil},
		{99, nil},
	} {
		got, err := s.LoadCommands(ctx, roomA, tc.after)
		mustNoErr(t, "LoadCommands", err)
		if !slices.Equal(seqs(got), tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Fatalf("LoadCommands(after %d): got seqs %v, want %v", tc.after, seqs(got), tc.want)
		}
		for _, r := range got {
			if r.CommandID != fmt.Sprintf("cmd-%d", r.Seq) {
				t.Fatalf("LoadCommands(after %d): seq %d has command %q", tc.after, r.Seq, r.CommandID)
			}
		}
	}
	none, err := s.LoadCommands(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "never-used"}, 0)
	mustNoErr(t, "LoadCommands of an unknown room", err)
	if len(none) != 0 {
		t.Fatalf("LoadCommands of an unknown room: got %d rows", len(none))
	}
}

func testFindCommand(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	c1 := command(roomA, 1, "cmd-1", 1000, "ev-1")
	c2 := command(roomA, 2, "cmd-2", 1001, "ev-2")
	mustAppend(t, s, persistence.Append{Command: c1})
	mustAppend(t, s, persistence.Append{Command: c2})
	got, err := s.FindCommand(ctx, roomA, "cmd-2")
	mustNoErr(t, "FindCommand cmd-2", err)
	wantCommand(t, "FindCommand cmd-2", got, c2)
	got, err = s.FindCommand(ctx, roomA, "cmd-1")
	mustNoErr(t, "FindCommand cmd-1", err)
	wantCommand(t, "FindCommand cmd-1", got, c1)
	_, err = s.FindCommand(ctx, roomA, "cmd-3")
	wantIs(t, "FindCommand of an unknown command", err, persistence.ErrNotFound)
	_, err = s.FindCommand(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}, "cmd-1")
	wantIs(t, "FindCommand of another room's command", err, persistence.ErrNotFound)
}

// wantUnchanged checks that a rejected Append left no trace: the log, the
// outbox and the snapshot are as before and the loser's command and events
// are nowhere.
func wantUnchanged(t *testing.T, s persistence.Store, winner persistence.CommandRecord, winnerSnap *persistence.Snapshot, loser persistence.Append) {
	t.Helper()
	ctx := t.Context()
	log, err := s.LoadCommands(ctx, winner.Key(), 0)
	mustNoErr(t, "LoadCommands", err)
	if len(log) != 1 {
		t.Fatalf("log after conflict: got seqs %v, want only the winner", seqs(log))
	}
	wantCommand(t, "log after conflict", log[0], winner)
	if loser.Command.CommandID != winner.CommandID {
		_, err = s.FindCommand(ctx, winner.Key(), loser.Command.CommandID)
		wantIs(t, "FindCommand of the rejected command", err, persistence.ErrNotFound)
	}
	for _, e := range loser.Command.Events {
		_, err := s.GetOutbox(ctx, e.EventID)
		wantIs(t, "GetOutbox of a rejected event", err, persistence.ErrNotFound)
	}
	all, err := s.ListOutbox(ctx, persistence.OutboxFilter{Limit: 100})
	mustNoErr(t, "ListOutbox", err)
	var want []string
	for _, e := range winner.Events {
		want = append(want, e.EventID)
	}
	slices.Sort(want)
	got := eventIDs(all)
	slices.Sort(got)
	wantIDs(t, "outbox after conflict", got, want)
	snap, err := s.LoadSnapshot(ctx, winner.Key())
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot after conflict", snap, winnerSnap)
}

func testDuplicateSeqConflict(t *testing.T, s persistence.Store) {
	winner := command(roomA, 1, "cmd-1", 1000, "ev-1a", "ev-1b")
	winnerSnap := snapshot(roomA, 1, 1000)
	mustAppend(t, s, persistence.Append{Command: winner, Snapshot: winnerSnap})

	loser := persistence.Append{
		Command:  command(roomA, 1, "cmd-other", 2000, "ev-x1", "ev-x2"),
		Snapshot: snapshot(roomA, 9, 2000),
	}
	err := s.Append(t.Context(), loser)
	wantIs(t, "Append of a taken seq", err, persistence.ErrConflict)
	wantUnchanged(t, s, winner, winnerSnap, loser)
}

func testDuplicateCommandIDConflict(t *testing.T, s persistence.Store) {
	winner := command(roomA, 1, "cmd-1", 1000, "ev-1a")
	winnerSnap := snapshot(roomA, 1, 1000)
	mustAppend(t, s, persistence.Append{Command: winner, Snapshot: winnerSnap})

	loser := persistence.Append{
		Command:  command(roomA, 2, "cmd-1", 2000, "ev-x1", "ev-x2"),
		Snapshot: snapshot(roomA, 2, 2000),
	}
	err := s.Append(t.Context(), loser)
	wantIs(t, "Append of a taken command_id", err, persistence.ErrConflict)
	wantUnchanged(t, s, winner, winnerSnap, loser)
	got, err := s.LoadCommands(t.Context(), roomA, 1)
	mustNoErr(t, "LoadCommands after 1", err)
	if len(got) != 0 {
		t.Fatalf("seq 2 was written by a rejected append: %v", seqs(got))
	}
}

func testAppendSnapshotNewerOnly(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	newest := snapshot(roomA, 5, 1500)
	mustNoErr(t, "SaveSnapshot", s.SaveSnapshot(ctx, *newest))

	// An older snapshot riding on an Append is dropped, the command is not.
	older := snapshot(roomA, 3, 1600)
	mustAppend(t, s, persistence.Append{Command: command(roomA, 3, "cmd-3", 1600, "ev-3"), Snapshot: older})
	got, err := s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot after an Append with an older one", got, newest)
	if _, err := s.FindCommand(ctx, roomA, "cmd-3"); err != nil {
		t.Fatalf("the command of an Append with an older snapshot was not written: %v", err)
	}

	// An equal seq does not replace either.
	same := snapshot(roomA, 5, 1700)
	same.State = []byte("other state at the same seq")
	mustAppend(t, s, persistence.Append{Command: command(roomA, 4, "cmd-4", 1700), Snapshot: same})
	got, err = s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot after an Append with the same seq", got, newest)

	newer := snapshot(roomA, 6, 1800)
	mustAppend(t, s, persistence.Append{Command: command(roomA, 6, "cmd-6", 1800), Snapshot: newer})
	got, err = s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot after an Append with a newer one", got, newer)
}

func testSaveSnapshotNewerOnly(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	_, err := s.LoadSnapshot(ctx, roomA)
	wantIs(t, "LoadSnapshot before any", err, persistence.ErrNotFound)

	s2 := snapshot(roomA, 2, 1000)
	mustNoErr(t, "SaveSnapshot seq 2", s.SaveSnapshot(ctx, *s2))
	got, err := s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "LoadSnapshot", got, s2)

	mustNoErr(t, "SaveSnapshot of an older seq is a no-op, not an error", s.SaveSnapshot(ctx, *snapshot(roomA, 1, 2000)))
	same := snapshot(roomA, 2, 2000)
	same.State = []byte("other")
	mustNoErr(t, "SaveSnapshot of the same seq is a no-op, not an error", s.SaveSnapshot(ctx, *same))
	got, err = s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "LoadSnapshot after older and equal saves", got, s2)

	s3 := snapshot(roomA, 3, 3000)
	mustNoErr(t, "SaveSnapshot seq 3", s.SaveSnapshot(ctx, *s3))
	got, err = s.LoadSnapshot(ctx, roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "LoadSnapshot after a newer save", got, s3)
}

func testCancelledContext(t *testing.T, s persistence.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a := persistence.Append{Command: command(roomA, 1, "cmd-1", 1000, "ev-1"), Snapshot: snapshot(roomA, 1, 1000)}
	err := s.Append(ctx, a)
	wantIs(t, "Append with a cancelled context", err, context.Canceled)

	log, err := s.LoadCommands(t.Context(), roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	if len(log) != 0 {
		t.Fatalf("Append with a cancelled context wrote seqs %v", seqs(log))
	}
	_, err = s.GetOutbox(t.Context(), "ev-1")
	wantIs(t, "outbox row of a cancelled Append", err, persistence.ErrNotFound)
	_, err = s.LoadSnapshot(t.Context(), roomA)
	wantIs(t, "snapshot of a cancelled Append", err, persistence.ErrNotFound)

	// The store is still usable, and the seq is still free.
	mustAppend(t, s, a)
}

func testNotFound(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	mustAppend(t, s, persistence.Append{Command: command(roomA, 1, "cmd-1", 1000, "ev-1")})
	_, err := s.LoadSnapshot(ctx, roomA)
	wantIs(t, "LoadSnapshot of a room without one", err, persistence.ErrNotFound)
	_, err = s.FindCommand(ctx, roomA, "missing")
	wantIs(t, "FindCommand", err, persistence.ErrNotFound)
	_, err = s.GetOutbox(ctx, "missing")
	wantIs(t, "GetOutbox", err, persistence.ErrNotFound)
	wantIs(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, "missing", 2000), persistence.ErrNotFound)
	wantIs(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, "missing", "boom", 2000, 2000), persistence.ErrNotFound)
	wantIs(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, "missing"), persistence.ErrNotFound)
}

func testRoomsIsolated(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	// Keys that collide if a backend concatenates app_code and room_id, or
	// prefix-matches room IDs.
	keys := []persistence.RoomKey{
		{AppCode: "app1", RoomID: "r1"},
		{AppCode: "app1", RoomID: "r10"},
		{AppCode: "app2", RoomID: "r1"},
		{AppCode: "ab", RoomID: "c"},
		{AppCode: "a", RoomID: "bc"},
	}
	// Every room takes the same seqs and command IDs.
	for i, k := range keys {
		for seq := int64(1); seq <= 2; seq++ {
			c := command(k, seq, fmt.Sprintf("cmd-%d", seq), int64(1000*i)+seq, fmt.Sprintf("ev-%d-%d", i, seq))
			c.CommandType = k.String() // tells the rooms apart on read
			mustAppend(t, s, persistence.Append{Command: c, Snapshot: snapshot(k, seq, int64(1000*i)+seq)})
		}
	}
	for i, k := range keys {
		log, err := s.LoadCommands(ctx, k, 0)
		mustNoErr(t, "LoadCommands "+k.String(), err)
		if len(log) != 2 {
			t.Fatalf("LoadCommands %s: got seqs %v, want [1 2]", k, seqs(log))
		}
		for _, r := range log {
			if r.Key() != k || r.CommandType != k.String() {
				t.Fatalf("LoadCommands %s returned a row of %s (%s)", k, r.Key(), r.CommandType)
			}
		}
		found, err := s.FindCommand(ctx, k, "cmd-2")
		mustNoErr(t, "FindCommand "+k.String(), err)
		if found.CommandType != k.String() || found.Events[0].EventID != fmt.Sprintf("ev-%d-2", i) {
			t.Fatalf("FindCommand %s returned %+v", k, found)
		}
		snap, err := s.LoadSnapshot(ctx, k)
		mustNoErr(t, "LoadSnapshot "+k.String(), err)
		wantSnapshot(t, "LoadSnapshot "+k.String(), snap, snapshot(k, 2, int64(1000*i)+2))
	}
	// A fence in one room does not leak into another.
	err := s.Append(ctx, persistence.Append{Command: command(keys[0], 2, "cmd-new", 9000)})
	wantIs(t, "Append of a taken seq", err, persistence.ErrConflict)
	mustAppend(t, s, persistence.Append{Command: command(keys[0], 3, "cmd-3", 9000)})
	if log, _ := s.LoadCommands(ctx, keys[1], 2); len(log) != 0 {
		t.Fatalf("an append to %s showed up in %s: %v", keys[0], keys[1], seqs(log))
	}
}

// appendRace runs appends concurrently and checks that exactly one wins
// and every other one gets ErrConflict. It returns the winner's index.
func appendRace(t *testing.T, s persistence.Store, appends []persistence.Append) int {
	t.Helper()
	errs := make([]error, len(appends))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range appends {
		wg.Go(func() {
			<-start
			errs[i] = s.Append(t.Context(), a)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("appends %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, persistence.ErrConflict):
			t.Fatalf("append %d: got %v, want ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no append succeeded: %v", errors.Join(errs...))
	}
	return winner
}

// wantOnlyWinner checks the log and the outbox hold exactly the winner.
func wantOnlyWinner(t *testing.T, s persistence.Store, winner persistence.Append) {
	t.Helper()
	log, err := s.LoadCommands(t.Context(), roomA, 0)
	mustNoErr(t, "LoadCommands", err)
	if len(log) != 1 {
		t.Fatalf("log after the race: got seqs %v, want only the winner", seqs(log))
	}
	wantCommand(t, "log after the race", log[0], winner.Command)
	all, err := s.ListOutbox(t.Context(), persistence.OutboxFilter{Limit: 100})
	mustNoErr(t, "ListOutbox", err)
	var want []string
	for _, e := range winner.Command.Events {
		want = append(want, e.EventID)
	}
	got := eventIDs(all)
	slices.Sort(got)
	slices.Sort(want)
	wantIDs(t, "outbox after the race", got, want)
	snap, err := s.LoadSnapshot(t.Context(), roomA)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot after the race", snap, winner.Snapshot)
}

func testConcurrentAppendSameSeq(t *testing.T, s persistence.Store) {
	const n = 16
	appends := make([]persistence.Append, n)
	for i := range appends {
		appends[i] = persistence.Append{
			Command:  command(roomA, 1, fmt.Sprintf("cmd-%d", i), int64(1000+i), fmt.Sprintf("ev-%d-a", i), fmt.Sprintf("ev-%d-b", i)),
			Snapshot: snapshot(roomA, 1, int64(1000+i)),
		}
		appends[i].Snapshot.State = []byte(fmt.Sprintf("state of writer %d", i))
	}
	wantOnlyWinner(t, s, appends[appendRace(t, s, appends)])
}

func testConcurrentAppendSameCommandID(t *testing.T, s persistence.Store) {
	const n = 16
	appends := make([]persistence.Append, n)
	for i := range appends {
		seq := int64(i + 1)
		appends[i] = persistence.Append{
			Command:  command(roomA, seq, "cmd-same", 1000+seq, fmt.Sprintf("ev-%d", i)),
			Snapshot: snapshot(roomA, seq, 1000+seq),
		}
	}
	wantOnlyWinner(t, s, appends[appendRace(t, s, appends)])
}

func testGiftVoidFence(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	sent := persistence.Append{Command: command(roomA, 1, "gift-sent", 1000, "ev-sent"), Snapshot: snapshot(roomA, 1, 1000), Gift: true}
	mustAppend(t, s, sent)
	for i := range 2 {
		ok, err := s.VoidGift(ctx, roomA, "gift-sent", 2000)
		mustNoErr(t, "VoidGift of an appended gift", err)
		if !ok {
			t.Fatalf("VoidGift #%d of an appended gift: got not sent", i+1)
		}
	}
	for i := range 2 {
		ok, err := s.VoidGift(ctx, roomA, "gift-void", 2000)
		mustNoErr(t, "VoidGift of an unknown gift", err)
		if ok {
			t.Fatalf("VoidGift #%d of a gift never appended: got sent", i+1)
		}
	}
	late := persistence.Append{Command: command(roomA, 2, "gift-void", 3000, "ev-late"), Snapshot: snapshot(roomA, 2, 3000), Gift: true}
	wantIs(t, "Append of a voided gift", s.Append(ctx, late), persistence.ErrConflict)
	wantUnchanged(t, s, sent.Command, sent.Snapshot, late)
	// The same room and command_id in another room are other gifts.
	other := persistence.RoomKey{AppCode: roomA.AppCode, RoomID: "room-b"}
	mustAppend(t, s, persistence.Append{Command: command(other, 1, "gift-void", 3000, "ev-other"), Gift: true})
	ok, err := s.VoidGift(ctx, other, "gift-void", 4000)
	mustNoErr(t, "VoidGift in another room", err)
	if !ok {
		t.Fatal("VoidGift in another room: got not sent, though that room appended it")
	}
	_, err = s.VoidGift(ctx, persistence.RoomKey{}, "x", 1)
	if err == nil {
		t.Fatal("VoidGift without a room: got nil error")
	}
}

// testConcurrentGiftAppendAndVoid races gift appends against voids of the
// same command_id: every void must report the one outcome that the log
// shows.
func testConcurrentGiftAppendAndVoid(t *testing.T, s persistence.Store) {
	const rounds, voiders = 12, 4
	for r := range rounds {
		key := persistence.RoomKey{AppCode: roomA.AppCode, RoomID: fmt.Sprintf("race-%d", r)}
		id := fmt.Sprintf("gift-%d", r)
		var (
			wg        sync.WaitGroup
			appendErr error
			answers   [voiders]bool
			errs      [voiders]error
		)
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			appendErr = s.Append(t.Context(), persistence.Append{Command: command(key, 1, id, 1000, id+"-ev"), Gift: true})
		})
		for i := range voiders {
			wg.Go(func() {
				<-start
				answers[i], errs[i] = s.VoidGift(t.Context(), key, id, 1000)
			})
		}
		close(start)
		wg.Wait()
		if appendErr != nil && !errors.Is(appendErr, persistence.ErrConflict) {
			t.Fatalf("round %d: append: %v", r, appendErr)
		}
		_, findErr := s.FindCommand(t.Context(), key, id)
		logged := findErr == nil
		if logged != (appendErr == nil) {
			t.Fatalf("round %d: append error %v but command logged %v", r, appendErr, logged)
		}
		for i := range voiders {
			mustNoErr(t, "VoidGift", errs[i])
			if answers[i] != logged {
				t.Fatalf("round %d: void %d answered sent=%v, log has the gift: %v", r, i, answers[i], logged)
			}
		}
	}
}
