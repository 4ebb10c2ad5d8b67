package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// benchAppend is a SendGift as the grain writes it: a reply, two events
// (gift sent, heat changed) and a snapshot every 50 commands.
func benchAppend(key persistence.RoomKey, seq int64, state []byte) persistence.Append {
	now := time.Now().UnixMilli()
	cmdID := fmt.Sprintf("cmd-%s-%d", key.RoomID, seq)
	ev := func(i int, typ, payload string) persistence.Envelope {
		return persistence.Envelope{
			EventID: fmt.Sprintf("%s:%s:%d:%d", key.AppCode, key.RoomID, seq, i), EventType: typ,
			AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CommandID: cmdID, RequestID: "req-" + cmdID,
			CreatedAtMs: now, Payload: json.RawMessage(payload),
		}
	}
	a := persistence.Append{Command: persistence.CommandRecord{
		AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: cmdID, CommandType: "SendGift",
		Reply:       []byte(fmt.Sprintf("\x08%c\x12\x0bevent-ids..%s", byte(seq), cmdID)),
		CreatedAtMs: now,
		Events: []persistence.Envelope{
			ev(0, "RoomGiftSent", `{"from_user_id":"u-1001","to_user_id":"u-2002","gift_id":"rose","gift_count":1,"heat_value":10}`),
			ev(1, "RoomHeatChanged", fmt.Sprintf(`{"delta":10,"heat":%d}`, seq*10)),
		},
	}}
	if seq%50 == 0 {
		a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, State: state, UpdatedAtMs: now}
	}
	return a
}

// BenchmarkAppend measures persisted commands per second on the local
// MariaDB: one goroutine per room, each appending seq+1 after its previous
// append returned (a grain's mailbox), with group commit on and off side
// by side. cmds/s counts acknowledged (committed) appends.
func BenchmarkAppend(b *testing.B) {
	cfg, _ := mysqltest.NewDatabase(b)
	cfg.QueryTimeout = 5 * time.Second
	if err := MigrateConfig(context.Background(), cfg, RoomSchema, cfg.RoomDatabase); err != nil {
		b.Fatal(err)
	}
	cfg.AutoMigrate = false
	state := make([]byte, 2048)
	for i := range state {
		state[i] = byte(i)
	}
	var run atomic.Int64
	for _, rooms := range []int{1, 64, 512} {
		for _, on := range []bool{true, false} {
			b.Run(fmt.Sprintf("rooms=%d/groupcommit=%s", rooms, map[bool]string{true: "on", false: "off"}[on]), func(b *testing.B) {
				c := cfg
				groupCommit(on)(&c)
				// Knobs for tuning runs; the defaults are what production gets.
				if d, err := time.ParseDuration(os.Getenv("ROOMCELL_BENCH_GC_LINGER")); err == nil {
					c.GroupCommit.Linger = d
				}
				w, _ := strconv.Atoi(os.Getenv("ROOMCELL_BENCH_GC_WRITERS"))
				if w <= 0 {
					w = DefaultGroupCommitWriters
				}
				s, err := Open(context.Background(), c, WithLogger(quiet), WithGroupCommitWriters(w))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				prefix := fmt.Sprintf("r%d", run.Add(1))
				var taken atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for r := range rooms {
					wg.Go(func() {
						key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("%s-%d", prefix, r)}
						for seq := int64(1); taken.Add(1) <= int64(b.N); seq++ {
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							err := s.Append(ctx, benchAppend(key, seq, state))
							cancel()
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
				if st := s.GroupCommitStats(); st.Batches > 0 {
					b.ReportMetric(float64(st.Appends)/float64(st.Batches), "appends/tx")
				}
			})
		}
	}
}

// joinAppend is a JoinRoom as the grain writes it: a small reply, one
// RoomUserJoined event with its outbox lease, and the room's epoch.
func joinAppend(key persistence.RoomKey, seq int64) persistence.Append {
	now := time.Now().UnixMilli()
	cmdID := fmt.Sprintf("cmd-%s-%d", key.RoomID, seq)
	user := fmt.Sprintf("u-%d", 100000+seq)
	return persistence.Append{Command: persistence.CommandRecord{
		AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: cmdID, CommandType: "JoinRoom",
		RequestHash: "0123456789abcdef0123456789abcdef",
		Reply:       []byte(fmt.Sprintf("\x08%c\x12\x1a%s:%s:%d:0", byte(seq), key.AppCode, key.RoomID, seq)),
		CreatedAtMs: now,
		Events: []persistence.Envelope{{
			EventID: fmt.Sprintf("%s:%s:%d:0", key.AppCode, key.RoomID, seq), EventType: "RoomUserJoined",
			AppCode: key.AppCode, RoomID: key.RoomID, RoomSeq: seq, CommandID: cmdID, RequestID: "req-0123456789abcdef01234567",
			CreatedAtMs: now, Payload: json.RawMessage(fmt.Sprintf(`{"user_id":%q,"joined_at_ms":%d}`, user, now)),
		}},
	}, Lease: &persistence.OutboxLease{Owner: "node-1/publisher", UntilMs: now + 5000}, Epoch: 3}
}

// joinBatch is what one group-commit transaction carries under load: the
// joins of 32 rooms.
const joinBatch = 32

func joinAppends(prefix string, seq int64) []persistence.Append {
	as := make([]persistence.Append, joinBatch)
	for r := range as {
		as[r] = joinAppend(persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("%s-%d", prefix, r)}, seq)
	}
	return as
}

// BenchmarkPrepareAppend measures the validation and encoding of one join
// (allocs/op and B/op are what to read).
func BenchmarkPrepareAppend(b *testing.B) {
	a := joinAppend(persistence.RoomKey{AppCode: "bench", RoomID: "room-1"}, 7)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := prepareAppend(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildStatements measures the statements of one batch of
// joinBatch joins (per op: one batch).
func BenchmarkBuildStatements(b *testing.B) {
	ps := make([]*pendingAppend, 0, joinBatch)
	for _, a := range joinAppends("room", 7) {
		p, err := prepareAppend(a)
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	b.ReportAllocs()
	for b.Loop() {
		buildStatements(ps, persistence.OutboxMQNone)
	}
}

// BenchmarkWriteBatch writes one batch of joinBatch joins per op in one
// transaction on the local MariaDB, preparing them first: the store's
// whole cost of a batch, the driver's included. Run it with a small fixed
// -benchtime (200x): allocs/op and B/op are what to read, not ns/op.
func BenchmarkWriteBatch(b *testing.B) {
	s := newTestStore(b, groupCommit(false))
	ps := make([]*pendingAppend, joinBatch)
	b.ReportAllocs()
	seq := int64(0)
	for b.Loop() {
		seq++
		b.StopTimer()
		as := joinAppends("room", seq)
		b.StartTimer()
		for i, a := range as {
			p, err := prepareAppend(a)
			if err != nil {
				b.Fatal(err)
			}
			ps[i] = p
		}
		s.writeBatch(context.Background(), ps)
		for _, p := range ps {
			if p.err != nil {
				b.Fatal(p.err)
			}
		}
	}
}
