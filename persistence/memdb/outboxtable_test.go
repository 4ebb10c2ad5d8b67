package memdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/hyapp/roomcell/persistence"
)

// The claim sets (the pending status set, room, mq, mqRoom) hold only the
// rows the claims may return, the status sets every row, each by its
// status, and a type set every row of its type. This drives random rows through every
// status change and checks after each step that each set holds exactly
// the rows it should, in order: a pending row missing from them would
// never be sent again, a stale entry would be claimed by its old fields.
func TestClaimIndexesHoldExactlyTheClaimableRows(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			checkClaimIndexes(t, rand.New(rand.NewPCG(seed, 13)))
		})
	}
}

func checkClaimIndexes(t *testing.T, rng *rand.Rand) {
	ctx := context.Background()
	s := New(WithOutboxMQ())
	rooms := []persistence.RoomKey{{AppCode: "a", RoomID: "r1"}, {AppCode: "a", RoomID: "r2"}, {AppCode: "b", RoomID: "r1"}}
	seqs := map[persistence.RoomKey]int64{}
	var ids []string
	now := int64(1000)
	for step := range 400 {
		now += int64(rng.IntN(50))
		pick := func() string { return ids[rng.IntN(len(ids))] }
		var err error
		switch op := rng.IntN(13); {
		case op < 3 || len(ids) == 0:
			key := rooms[rng.IntN(len(rooms))]
			seqs[key]++
			seq := seqs[key]
			cmdID := fmt.Sprintf("%s-%s-%d", key.AppCode, key.RoomID, seq)
			var evs []persistence.Envelope
			for n := range 1 + rng.IntN(3) {
				evs = append(evs, persistence.Envelope{EventID: fmt.Sprintf("%s:%d", cmdID, n), EventType: []string{"T", "K"}[rng.IntN(2)],
					AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CommandID: cmdID, CreatedAtMs: now - int64(rng.IntN(30))})
				ids = append(ids, evs[n].EventID)
			}
			err = s.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID,
				Seq: seq, CommandID: cmdID, Events: evs, CreatedAtMs: now}})
		case op == 3:
			err = s.MarkOutboxPublishedBatch(ctx, []string{pick(), pick()}, now)
		case op == 4:
			err = s.MarkOutboxFailed(ctx, pick(), "down", now, now+int64(rng.IntN(200)))
		case op == 5:
			err = s.ParkOutbox(ctx, pick(), "bad", now)
		case op == 6:
			if err = s.RequeueOutbox(ctx, pick(), now); err != nil && isConflict(err) {
				err = nil
			}
		case op == 7:
			if err = s.SkipOutbox(ctx, pick(), "ops", "x", now); err != nil && isConflict(err) {
				err = nil
			}
		case op == 8:
			_, err = s.ClaimPendingOutbox(ctx, fmt.Sprint("relay-", rng.IntN(2)), now, 100, 1+rng.IntN(5))
		case op == 9:
			_, err = s.ClaimOutboxMQ(ctx, "fanout", now, 100, 1+rng.IntN(5))
		case op == 10:
			err = s.MarkOutboxMQPublished(ctx, []string{pick()}, now)
		case op == 11:
			err = s.ParkOutboxMQ(ctx, pick())
		default:
			// The first read of a type builds its set from the rows
			// stored; the writes after it keep it.
			_, err = s.RoomOutboxAfter(ctx, "K", now-int64(rng.IntN(100)), "", 1+rng.IntN(5))
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		assertClaimIndexes(t, s, step)
	}
}

func isConflict(err error) bool { return errors.Is(err, persistence.ErrConflict) }

// assertClaimIndexes compares each ordered set with the rows it should
// hold, read from the id map (which holds every row).
func assertClaimIndexes(t *testing.T, s *Store, step int) {
	t.Helper()
	stats, err := s.OutboxStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tbl := s.outbox
	tbl.mu.RLock()
	defer tbl.mu.RUnlock()
	var status, room, mq, mqRoom, kinds []*outboxEntry
	pending := 0
	for _, e := range tbl.byID {
		status = append(status, e)
		if e.Status == persistence.OutboxPending {
			room = append(room, e)
			pending++
		}
		if e.MQStatus == persistence.OutboxMQPending {
			mq, mqRoom = append(mq, e), append(mqRoom, e)
		}
		if e.EventType == "K" {
			kinds = append(kinds, e)
		}
	}
	if stats.Pending != int64(pending) || stats.MQPending != int64(len(mq)) {
		t.Fatalf("step %d: stats count %d pending, %d MQ-pending; the rows %d, %d", step, stats.Pending, stats.MQPending, pending, len(mq))
	}
	byCreated := func(a, b *outboxEntry) int {
		return cmp.Or(cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.EventID, b.EventID))
	}
	byRoom := func(a, b *outboxEntry) int {
		return cmp.Or(cmp.Compare(a.AppCode, b.AppCode), cmp.Compare(a.RoomID, b.RoomID), cmp.Compare(a.RoomSeq, b.RoomSeq), cmp.Compare(a.EventID, b.EventID))
	}
	slices.SortFunc(status, func(a, b *outboxEntry) int { return cmp.Or(cmp.Compare(a.Status, b.Status), byCreated(a, b)) })
	slices.SortFunc(room, byRoom)
	slices.SortFunc(mq, byCreated)
	slices.SortFunc(mqRoom, byRoom)
	slices.SortFunc(kinds, byCreated)
	// Each kind of set read in its whole order: the status sets by status,
	// the room sets by room.
	statusSets := func() []*rowSet {
		var out []*rowSet
		for _, k := range slices.Sorted(maps.Keys(tbl.byStatus)) {
			out = append(out, tbl.byStatus[k])
		}
		return out
	}
	roomSets := func(m roomSets) []*rowSet {
		var out []*rowSet
		for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b persistence.RoomKey) int {
			return cmp.Or(cmp.Compare(a.AppCode, b.AppCode), cmp.Compare(a.RoomID, b.RoomID))
		}) {
			if m[k].tree.Len() == 0 {
				t.Fatalf("step %d: room %v keeps an empty set", step, k)
			}
			out = append(out, m[k])
		}
		return out
	}
	cases := []struct {
		index string
		sets  []*rowSet
		want  []*outboxEntry
	}{{"status", statusSets(), status}, {"room", roomSets(tbl.room), room}, {"mq", []*rowSet{tbl.mq}, mq}, {"mqRoom", roomSets(tbl.mqRoom), mqRoom}}
	if k := tbl.byType["K"]; k != nil {
		cases = append(cases, struct {
			index string
			sets  []*rowSet
			want  []*outboxEntry
		}{"type K", []*rowSet{k}, kinds})
	}
	for _, c := range cases {
		var got []*outboxEntry
		for _, set := range c.sets {
			set.tree.Scan(func(e *outboxEntry) bool {
				got = append(got, e)
				return true
			})
		}
		// The very entries, not equal ones: a set holding a replaced
		// entry would find it by stale fields.
		if !slices.Equal(got, c.want) {
			t.Fatalf("step %d: set %s holds %v, want %v", step, c.index, ids(got), ids(c.want))
		}
	}
}

func ids(es []*outboxEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.EventID
	}
	return out
}

// An outbox row goes through outboxEntry on every write; a field of
// persistence.OutboxRow that newOutboxEntry or row forgot would be lost
// silently. Every field is set to a distinct non-zero value by reflection,
// so a field added later is covered without touching this test.
func TestOutboxEntryKeepsEveryField(t *testing.T) {
	var row persistence.OutboxRow
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			n++
			switch f.Kind() {
			case reflect.String:
				f.SetString(fmt.Sprint("v", n))
			case reflect.Int, reflect.Int64, reflect.Int32:
				f.SetInt(int64(n))
			case reflect.Uint32:
				f.SetUint(uint64(n))
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Slice:
				f.SetBytes([]byte(fmt.Sprint(`"p`, n, `"`)))
			case reflect.Struct:
				fill(f)
			default:
				t.Fatalf("field %s of kind %s: teach this test to fill it", v.Type().Field(i).Name, f.Kind())
			}
		}
	}
	fill(reflect.ValueOf(&row).Elem())
	env := row.Envelope
	got := newOutboxEntry(&env, row).row()
	if !reflect.DeepEqual(got, row) {
		t.Fatalf("row through outboxEntry:\n got %+v\nwant %+v", got, row)
	}
	got.Envelope.Payload[0] = 'x'
	if env.Payload[0] == 'x' {
		t.Fatal("row() handed out the stored payload: a caller could change the stored row")
	}
}

// A row that went out at once keeps no part for failures, resolutions or
// the MQ fanout's lease; any one of those fields set keeps it, and every
// row reads back as stored.
func TestOutboxEntryKeepsRareFieldsApart(t *testing.T) {
	base := persistence.OutboxRow{Envelope: persistence.Envelope{EventID: "e1", Payload: []byte(`{}`)},
		Status: persistence.OutboxPublished, MQStatus: persistence.OutboxMQNone, CreatedAtMs: 1, UpdatedAtMs: 2, PublishedAtMs: 3}
	rare := []func(*persistence.OutboxRow){
		func(r *persistence.OutboxRow) {},
		func(r *persistence.OutboxRow) { r.LastError = "boom" },
		func(r *persistence.OutboxRow) { r.ResolvedBy = "ops" },
		func(r *persistence.OutboxRow) { r.Resolution = "dropped" },
		func(r *persistence.OutboxRow) { r.MQLockedBy = "n1" },
		func(r *persistence.OutboxRow) { r.ResolvedAtMs = 9 },
		func(r *persistence.OutboxRow) { r.MQPublishedAtMs = 9 },
		func(r *persistence.OutboxRow) { r.MQLockUntilMs = 9 },
		func(r *persistence.OutboxRow) { r.EffectsDone = 9 },
	}
	for i, set := range rare {
		row := base
		set(&row)
		env := row.Envelope
		e := newOutboxEntry(&env, row)
		if (e.rare == nil) != (i == 0) {
			t.Fatalf("case %d: rare part kept %v, want %v", i, e.rare != nil, i != 0)
		}
		if got := e.row(); !reflect.DeepEqual(got, row) {
			t.Fatalf("case %d: row through outboxEntry:\n got %+v\nwant %+v", i, got, row)
		}
		if e.mqLockUntilMs() != row.MQLockUntilMs {
			t.Fatalf("case %d: MQ lease until %d, want %d", i, e.mqLockUntilMs(), row.MQLockUntilMs)
		}
	}
	if size := unsafe.Sizeof(outboxEntry{}); size > 112 {
		t.Fatalf("outboxEntry is %d bytes, want at most 112 (a size class of its own)", size)
	}
}
