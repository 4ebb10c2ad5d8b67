package purge

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

const (
	propT0       = int64(1_700_000_000_000)
	propSeeds    = 8
	propCommands = 1500
)

// TestRecoveryAfterCompactionEqualsLive is the property: for random
// command sequences in a few rooms, with purge rounds (short retention,
// small batches) at random points, a room recovered from the store (its
// snapshot plus the log after it) always equals the live room, and the log
// after the snapshot is complete. The rounds must actually delete log rows,
// or the property proves nothing.
func TestRecoveryAfterCompactionEqualsLive(t *testing.T) {
	seeds := []uint64{uint64(time.Now().UnixNano()) | 1}
	for i := range uint64(propSeeds) {
		seeds = append(seeds, i+1)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			if err := compactionProperty(t, seed); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		})
	}
}

type propRoom struct {
	key  persistence.RoomKey
	live room.State
}

func compactionProperty(t *testing.T, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	store := memdb.New()
	now := propT0
	svc, err := NewService(Deps{
		Purgers: []persistence.Purger{store},
		Config: configs.WithDefaults(configs.RetentionConfig{CommandLog: time.Minute, OutboxPublished: time.Minute,
			BatchSize: 1 + r.IntN(7), BatchPause: time.Microsecond, RowsPerSecond: 1 << 30, Interval: time.Hour}),
		NodeID: "prop", Now: func() time.Time { return time.UnixMilli(now) },
	})
	if err != nil {
		return err
	}
	rooms := make([]*propRoom, 3)
	for i := range rooms {
		k := persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("room-%d", i)}
		rooms[i] = &propRoom{key: k, live: room.NewState(k.AppCode, k.RoomID)}
	}
	users := []string{"owner", "admin", "u1", "u2", "u3", "u4"}
	purged, compactions := int64(0), 0
	for step := range propCommands {
		now += r.Int64N(3000)
		pr := rooms[r.IntN(len(rooms))]
		c := randomCommand(r, step, pr, users, now)
		evs, err := room.Decide(pr.live, c)
		if err != nil || !room.Mutates(c.Type) {
			continue
		}
		seq := pr.live.Seq + 1
		next := room.ApplyCommand(pr.live, seq, evs)
		a, err := appendOf(c, seq, evs, next, r.IntN(15) == 0)
		if err != nil {
			return err
		}
		if err := store.Append(t.Context(), a); err != nil {
			return fmt.Errorf("step %d: append: %w", step, err)
		}
		pr.live = next
		for _, e := range a.Command.Events {
			if r.IntN(4) != 0 { // some rows stay pending for ever
				if err := store.MarkOutboxPublished(t.Context(), e.EventID, now); err != nil {
					return err
				}
			}
		}
		if r.IntN(60) == 0 {
			compactions++
			for _, tr := range svc.Round(t.Context()) {
				if tr.Err != nil {
					return fmt.Errorf("step %d: purge %s: %w", step, tr.Table, tr.Err)
				}
				if tr.Table == persistence.PurgeCommandLog {
					purged += tr.Rows
				}
			}
			for _, pr := range rooms {
				if err := recoversTo(t, store, pr); err != nil {
					return fmt.Errorf("step %d, after compaction %d: %w", step, compactions, err)
				}
			}
		}
	}
	if purged == 0 || compactions < 5 {
		return fmt.Errorf("%d compactions deleted %d log rows: the property was not exercised", compactions, purged)
	}
	for _, pr := range rooms {
		if err := recoversTo(t, store, pr); err != nil {
			return fmt.Errorf("at the end: %w", err)
		}
	}
	pending, err := store.ListPendingOutbox(t.Context(), 1<<20)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if p.Status != persistence.OutboxPending {
			return fmt.Errorf("pending scan returned %s row %s", p.Status, p.Envelope.EventID)
		}
	}
	t.Logf("%d compactions deleted %d log rows; %d pending rows kept", compactions, purged, len(pending))
	return nil
}

// recoversTo rebuilds the room as an activation does and compares it with
// the live state.
func recoversTo(t *testing.T, store persistence.Store, pr *propRoom) error {
	s := room.NewState(pr.key.AppCode, pr.key.RoomID)
	after := int64(0)
	snap, err := store.LoadSnapshot(t.Context(), pr.key)
	switch {
	case err == nil:
		if s, err = room.UnmarshalState(snap.State); err != nil {
			return err
		}
		after = snap.Seq
	case !isNotFound(err):
		return err
	}
	recs, err := store.LoadCommands(t.Context(), pr.key, after)
	if err != nil {
		return err
	}
	for i, rec := range recs {
		if rec.Seq != after+int64(i)+1 {
			return fmt.Errorf("%s: log after the snapshot (seq %d) has a hole at %d (got %d)", pr.key, after, after+int64(i)+1, rec.Seq)
		}
		evs := make([]room.Event, 0, len(rec.Events))
		for _, env := range rec.Events {
			e, err := room.DecodeEvent(env.EventType, env.Payload)
			if err != nil {
				return err
			}
			evs = append(evs, e)
		}
		s = room.ApplyCommand(s, rec.Seq, evs)
	}
	if !reflect.DeepEqual(s, pr.live) {
		return fmt.Errorf("%s recovered from snapshot %d + %d commands differs:\nrecovered %#v\nlive      %#v", pr.key, after, len(recs), s, pr.live)
	}
	return nil
}

// appendOf is the grain's write of one command: envelopes as JSON payloads,
// and a snapshot of the new state when snap is set.
func appendOf(c room.Command, seq int64, evs []room.Event, next room.State, snap bool) (persistence.Append, error) {
	rec := persistence.CommandRecord{AppCode: c.AppCode, RoomID: c.RoomID, Seq: seq, CommandID: c.CommandID,
		CommandType: c.Type, Reply: []byte("ok"), CreatedAtMs: c.NowMs}
	for i, e := range evs {
		payload, err := json.Marshal(e)
		if err != nil {
			return persistence.Append{}, err
		}
		rec.Events = append(rec.Events, persistence.Envelope{EventID: room.EventID(c.AppCode, c.RoomID, seq, i), EventType: e.EventType(),
			AppCode: c.AppCode, RoomID: c.RoomID, RoomSeq: seq, CommandID: c.CommandID, CreatedAtMs: c.NowMs, Payload: payload})
	}
	a := persistence.Append{Command: rec}
	if snap {
		b, err := next.Marshal()
		if err != nil {
			return a, err
		}
		a.Snapshot = &persistence.Snapshot{AppCode: c.AppCode, RoomID: c.RoomID, Seq: seq, State: b, UpdatedAtMs: c.NowMs}
	}
	return a, nil
}

func randomCommand(r *rand.Rand, step int, pr *propRoom, users []string, now int64) room.Command {
	pick := func(from []string) string { return from[r.IntN(len(from))] }
	c := room.Command{CommandID: fmt.Sprintf("c%d", step), AppCode: pr.key.AppCode, RoomID: pr.key.RoomID,
		UserID: pick(users), NowMs: now}
	if !pr.live.Exists {
		c.Type, c.UserID, c.Name, c.MicSeats, c.Admins = room.CmdCreateRoom, "owner", "prop", 1+r.IntN(4), []string{"admin"}
		return c
	}
	switch k := r.IntN(100); {
	case k < 30:
		c.Type = room.CmdJoinRoom
	case k < 42:
		c.Type = room.CmdLeaveRoom
	case k < 62:
		c.Type, c.Seat = room.CmdTakeMic, r.IntN(5)
	case k < 72:
		c.Type = room.CmdReleaseMic
	case k < 90:
		c.Type, c.ToUserID, c.GiftID, c.GiftCount, c.HeatValue = room.CmdSendGift, pick(users), "rose", 1+r.Int64N(3), r.Int64N(500)
	default:
		c.Type, c.UserID, c.TargetUserID, c.BanSeconds, c.Reason = room.CmdKickUser, pick([]string{"owner", "admin"}), pick(users), r.Int64N(5), "prop"
	}
	return c
}
