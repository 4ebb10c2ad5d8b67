package noticeapp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

func newSupervisor(t *testing.T) *supervise.Supervisor {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return noticetest.Quiet }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	return sup
}

type nopPublisher struct{}

func (nopPublisher) SendNotice(context.Context, string, string, string, []byte, string) error {
	return nil
}

// The local default runs nothing; an enabled worker without its source is
// a start-up error naming it.
func TestStartNothingAndMissingSources(t *testing.T) {
	store := memdb.NewNoticeStore()
	defer store.Close()
	svc, err := noticeapp.Start(newSupervisor(t), noticeapp.Deps{Config: configs.Default().Notice, Store: store, Modules: processModules(nil, nil), Publisher: nopPublisher{}, Logger: noticetest.Quiet})
	if err != nil || svc.Running() || svc.Kick(persistence.SourceWalletOutbox) {
		t.Fatalf("default config: running=%v err=%v", svc.Running(), err)
	}
	if err := svc.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default().Notice
	cfg.WalletNoticeWorker.Enabled = true
	if _, err := noticeapp.Start(newSupervisor(t), noticeapp.Deps{Config: cfg, Store: store, Modules: processModules(nil, nil), Publisher: nopPublisher{}, Logger: noticetest.Quiet}); err == nil || !strings.Contains(err.Error(), "wallet_notice_worker") {
		t.Fatalf("wallet worker without source: %v", err)
	}
	cfg = configs.Default().Notice
	cfg.MQ.Enabled, cfg.MQ.RoomOutbox.Enabled = true, true
	if _, err := noticeapp.Start(newSupervisor(t), noticeapp.Deps{Config: cfg, Store: store, Modules: processModules(nil, nil), Publisher: nopPublisher{}, Logger: noticetest.Quiet}); err == nil || !strings.Contains(err.Error(), "MQ") {
		t.Fatalf("mq without subscriber: %v", err)
	}
}

// offers counts, per fact, which entries offered it to the delivery table.
type offers struct {
	persistence.NoticeStore
	mu sync.Mutex
	by map[string]map[string]bool // event id → ingress → offered
}

func (o *offers) Ingest(ctx context.Context, rows []persistence.NoticeDelivery, nowMs int64) (int, error) {
	o.mu.Lock()
	for _, d := range rows {
		if o.by[d.SourceEventID] == nil {
			o.by[d.SourceEventID] = map[string]bool{}
		}
		o.by[d.SourceEventID][d.Ingress] = true
	}
	o.mu.Unlock()
	return o.NoticeStore.Ingest(ctx, rows, nowMs)
}

func (o *offers) both() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, in := range o.by {
		if in[persistence.IngressPoll] && in[persistence.IngressMQ] {
			n++
		}
	}
	return n
}

// MySQL polling and the JetStream fanout both on: every kick reaches the
// notice table by both entries, and each kicked user still gets exactly
// one C2C room_notice; the room groups get their messages through the
// relay's fanout publisher.
func TestPollingAndMQBothOnSendOnce(t *testing.T) {
	const kicks = 300
	ctx := context.Background()
	dbCfg, _ := mysqltest.NewDatabase(t)
	roomStore, err := mysql.Open(ctx, dbCfg, mysql.WithLogger(noticetest.Quiet), mysql.WithOutboxMQ(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = roomStore.Close() })
	ns, err := mysql.OpenNoticeStore(ctx, dbCfg, mysql.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })

	var b [6]byte
	_, _ = rand.Read(b[:])
	var mqCfg configs.MQConfig
	mqCfg.Enabled, mqCfg.Kind, mqCfg.Servers = true, configs.MQKindNATS, []string{"nats://127.0.0.1:4222"}
	mqCfg.RoomOutbox.Enabled, mqCfg.RoomOutbox.Topic = true, "roomcell_test_"+hex.EncodeToString(b[:])
	mqCfg.RoomOutbox.ConsumerGroup, mqCfg.RoomOutbox.MaxRedeliver = "hyapp-notice-room-outbox", 16
	js, err := mq.DialJetStream(ctx, mqCfg, mq.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteTopic(dctx, mqCfg.RoomOutbox.Topic)
		js.Close()
	})

	fake, pub := noticetest.FakeIM(t)
	sup := newSupervisor(t)
	relayCfg := configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 100, PublishTimeout: 3 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 10 * time.Second})
	r, err := relay.Start(sup, relay.Deps{Store: roomStore, Publisher: pub, NodeID: "n1", Logger: noticetest.Quiet, Config: relayCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(10 * time.Second) })
	fanout, err := relay.StartMQ(sup, relay.MQDeps{Store: roomStore, MQ: js, Topic: mqCfg.RoomOutbox.Topic, NodeID: "n1",
		Logger: noticetest.Quiet, Config: relayCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fanout.Stop(10 * time.Second) })

	store := &offers{NoticeStore: ns, by: map[string]map[string]bool{}}
	var ncfg configs.NoticeConfig
	ncfg.RoomNoticeWorker = configs.WithDefaults(configs.NoticeWorkerConfig{Enabled: true, PollInterval: 50 * time.Millisecond})
	ncfg.MQ = mqCfg
	svc, err := noticeapp.Start(sup, noticeapp.Deps{Config: ncfg, Store: store, Modules: processModules(nil, ns.RoomOutbox()), Publisher: pub,
		MQ: js, NodeID: "n1", Logger: noticetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(10 * time.Second) })

	// Kicks in 30 rooms, as the room grain appends them: a join and a kick
	// per command.
	var ids []string
	for i := range kicks {
		roomID, seq := fmt.Sprint("r", i%30), int64(i/30+1)
		now := time.Now().UnixMilli()
		rec := persistence.CommandRecord{AppCode: "lalu", RoomID: roomID, Seq: seq, CommandID: fmt.Sprint("kick-", i),
			CommandType: "KickUser", CreatedAtMs: now}
		joined, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("w", i), JoinedAtMs: now})
		kicked, _ := json.Marshal(room.RoomUserKicked{TargetUserID: fmt.Sprint("u", i), OperatorUserID: "owner", Reason: "spam"})
		for j, ev := range []struct {
			typ     string
			payload []byte
		}{{room.TypeRoomUserJoined, joined}, {room.TypeRoomUserKicked, kicked}} {
			rec.Events = append(rec.Events, persistence.Envelope{EventID: room.EventID("lalu", roomID, seq, j), EventType: ev.typ,
				AppCode: "lalu", RoomID: roomID, RoomSeq: seq, CommandID: rec.CommandID, CreatedAtMs: now, Payload: ev.payload})
		}
		ids = append(ids, rec.Events[1].EventID)
		if err := roomStore.Append(ctx, persistence.Append{Command: rec}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		if err := ns.DB().QueryRow("SELECT COUNT(*) FROM notice_delivery_events WHERE status = 'delivered'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		st, err := roomStore.OutboxStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == kicks && st.Pending == 0 && store.both() == kicks {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %d of %d notices delivered, %d room events pending, %d kicks offered by both entries", n, kicks, st.Pending, store.both())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let a late second send show up, if there were one
	counts := fake.EventIDCounts()
	for i, id := range ids {
		msgs := fake.C2CMessages(fmt.Sprint("u", i))
		if len(msgs) != 1 || msgs[0].Ext != roomnotice.ExtRoomNotice || msgs[0].EventIDs[0] != id {
			t.Fatalf("u%d got %+v, want one room_notice for %s", i, msgs, id)
		}
		if counts[id] != 2 { // the group message and the private notice
			t.Fatalf("%s reached IM %d times, want 2", id, counts[id])
		}
	}
	var byIngress = map[string]int{}
	rows, err := ns.DB().Query("SELECT ingress, COUNT(*) FROM notice_delivery_events GROUP BY ingress")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var in string
		var n int
		_ = rows.Scan(&in, &n)
		byIngress[in] = n
	}
	rows.Close()
	sends, dups := fake.CallCount(tencentim.APISendMsg), fake.Duplicates()
	t.Logf("%d kicks offered by both entries; rows written first by poll %d, by mq %d; C2C sendmsg calls %d, duplicates %d",
		store.both(), byIngress[persistence.IngressPoll], byIngress[persistence.IngressMQ], sends, dups)
	if sends != kicks || dups != 0 {
		t.Fatalf("%d C2C sends and %d duplicates for %d kicks: want exactly one send each", sends, dups, kicks)
	}
}

// processModules is the module list cmd/roomcell passes.
func processModules(w walletnotice.Source, r roomnotice.Source) []noticeapp.Module {
	return []noticeapp.Module{walletnotice.App(w), roomnotice.App(r)}
}

// giftModule is a test-only third notice source, written as a module
// package would write it: its own source name, worker and scanner, and a
// constructor closing over its reader. Adding it to the role is its entry
// in Deps.Modules and nothing else.
func giftModule(facts []string, cfg configs.NoticeWorkerConfig) noticeapp.Module {
	return func(d noticeapp.Deps) (noticeapp.Plan, error) {
		return noticeapp.Plan{Run: cfg.Enabled, Config: cfg,
			Worker: notice.Module{Name: "gift_notice_worker", Source: "gift_outbox", Scanner: &giftScanner{facts: facts}}}, nil
	}
}

// giftScanner hands out its facts once each, in order.
type giftScanner struct {
	facts []string
	next  int
}

func (s *giftScanner) Reset(from persistence.NoticeCursor) { s.next = int(from.Num) }

func (s *giftScanner) Scan(_ context.Context, nowMs int64, limit int) (notice.ScanResult, error) {
	var res notice.ScanResult
	for ; s.next < len(s.facts) && len(res.Deliveries) < limit; s.next++ {
		id := s.facts[s.next]
		res.Deliveries = append(res.Deliveries, persistence.NoticeDelivery{
			NoticeKey: persistence.NoticeKey{SourceName: "gift_outbox", AppCode: "lalu", SourceEventID: id, Channel: persistence.ChannelIMC2C},
			EventType: "GiftThanks", UserID: "u-" + id, Ext: "gift_notice", Payload: json.RawMessage(`{"event_id":"` + id + `"}`),
			SourceCreatedAtMs: nowMs,
		})
	}
	res.Safe = persistence.NoticeCursor{Num: int64(s.next)}
	res.More = s.next < len(s.facts)
	return res, nil
}

// sends records the notices a publisher was asked to send.
type sends struct {
	mu  sync.Mutex
	got map[string]string // event id → receiver
}

func (p *sends) SendNotice(_ context.Context, _, to, ext string, _ []byte, eventID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ext == "gift_notice" {
		p.got[eventID] = to
	}
	return nil
}

func (p *sends) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// A third source runs beside the process's two with nothing but its entry
// in the module list: its worker scans, ingests and delivers every fact
// to its receiver, and operators can kick it by its source name.
func TestThirdModuleIsOneEntryInTheList(t *testing.T) {
	store := memdb.NewNoticeStore()
	defer store.Close()
	cfg := configs.Default().Notice.WalletNoticeWorker
	cfg.Enabled, cfg.PollInterval = true, 20*time.Millisecond
	facts := []string{"g1", "g2", "g3", "g4", "g5"}
	pub := &sends{got: map[string]string{}}
	modules := append(processModules(nil, nil), giftModule(facts, cfg))
	svc, err := noticeapp.Start(newSupervisor(t), noticeapp.Deps{Config: configs.Default().Notice, Store: store, Modules: modules,
		Publisher: pub, NodeID: "n1", Logger: noticetest.Quiet})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer svc.Stop(10 * time.Second)
	if !svc.Running() || !svc.Kick("gift_outbox") || svc.Kick(persistence.SourceWalletOutbox) {
		t.Fatalf("the gift worker should run alone (the default config turns the other two off)")
	}
	deadline := time.Now().Add(20 * time.Second)
	for pub.count() < len(facts) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pub.mu.Lock()
	got := maps.Clone(pub.got)
	pub.mu.Unlock()
	for _, id := range facts {
		if got[id] != "u-"+id {
			t.Fatalf("fact %s: sent to %q, want u-%s (all sends: %v)", id, got[id], id, got)
		}
	}
	// The worker marks a row delivered after its send returns, so the last
	// sends' rows may still be in flight here; each must reach delivered.
	for _, id := range facts {
		key := persistence.NoticeKey{SourceName: "gift_outbox", AppCode: "lalu", SourceEventID: id, Channel: persistence.ChannelIMC2C}
		for {
			d, err := store.Get(t.Context(), key)
			if err == nil && d.Status == persistence.NoticeDelivered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("row %s: status %q, %v; want delivered", id, d.Status, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Two modules of one source would deliver each fact twice; Start refuses.
func TestTwoModulesOfOneSourceRefused(t *testing.T) {
	store := memdb.NewNoticeStore()
	defer store.Close()
	cfg := configs.Default().Notice.WalletNoticeWorker
	cfg.Enabled = true
	_, err := noticeapp.Start(newSupervisor(t), noticeapp.Deps{Config: configs.Default().Notice, Store: store,
		Modules: []noticeapp.Module{giftModule(nil, cfg), giftModule(nil, cfg)}, Publisher: nopPublisher{}, Logger: noticetest.Quiet})
	if err == nil || !strings.Contains(err.Error(), "gift_outbox") {
		t.Fatalf("two modules of gift_outbox: %v", err)
	}
}
