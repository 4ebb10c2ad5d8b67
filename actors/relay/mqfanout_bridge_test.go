//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq/rocketmqtest"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// Seed 003's room IM bridge on RocketMQ (the machine's broker): 2,000
// joins in 40 rooms reach the topic through the MQ fanout, and the bridge
// group alone (in order per room) sends them to IM and marks them; the
// relay then finds nothing to send; the bridge's messages handled again
// (a restart) send nothing; and the relay and the bridge racing for 200
// new pending rows give each event to its group at least once and at most
// twice (two senders of one pending row, as the rooms' sync path and the
// relay can be today; clients drop the second by event_id). Every row ends
// IM-published; a message that does not decode is refused as corrupt.
func TestRocketMQIMBridgeSendsEachEventOnce(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	s := memdb.New(memdb.WithOutboxMQ())
	t.Cleanup(func() { _ = s.Close() })
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	imCfg := fake.ClientConfig()
	imCfg.RatePerSecond, imCfg.GroupRatePerSecond = 1_000_000, 1_000_000
	client, err := tencentim.New(imCfg, tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet))
	t.Cleanup(pub.Close)
	const rooms, events = 40, 2000
	for r := range rooms {
		if err := pub.EnsureGroup(ctx, "br", fmt.Sprint("r", r), "", ""); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range events {
		id, seq := fmt.Sprint("r", i%rooms), int64(i/rooms+1)
		payload, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("u", i), JoinedAtMs: 1})
		env := persistence.Envelope{EventID: room.EventID("br", id, seq, 0), EventType: room.TypeRoomUserJoined,
			AppCode: "br", RoomID: id, RoomSeq: seq, CommandID: fmt.Sprint("c", i), CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
		rec := persistence.CommandRecord{AppCode: "br", RoomID: id, Seq: seq, CommandID: env.CommandID,
			CommandType: room.CmdJoinRoom, CreatedAtMs: env.CreatedAtMs, Events: []persistence.Envelope{env}}
		if err := s.Append(ctx, persistence.Append{Command: rec}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.EventID)
	}

	shared := rocketmqtest.Shared()
	topic := shared.Topic(t, "roomcell_bridge_")
	c, err := rocketmq.Dial(ctx, shared.Config(), rocketmq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	deps := relay.IMBridgeDeps{Store: s, Publisher: pub, PublishTimeout: 5 * time.Second, NodeID: "n1", Logger: quiet}
	handler := func(ctx context.Context, m mq.Message) error {
		err := relay.BridgeIM(ctx, deps, m.Data)
		if errors.Is(err, relay.ErrCorruptEnvelope) {
			return fmt.Errorf("%w: %v", mq.ErrDrop, err)
		}
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	k, err := c.Subscribe(sctx, mq.Subscription{Topic: topic, Group: "hyapp-room-im-bridge-" + topic, Ordered: true, MaxRedeliver: 3, Handler: handler})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })

	// The fanout puts the rows on the topic; the bridge alone sends them
	// to IM (the relay is not running yet).
	cfg := configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 200, PublishTimeout: 5 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 20 * time.Second})
	fanout := relay.MQDeps{Store: s, MQ: c, Topic: topic, NodeID: "n1", Logger: quiet, Config: cfg}
	for {
		res, err := relay.ProcessMQBatch(ctx, fanout, "fanout")
		if err != nil {
			t.Fatal(err)
		}
		if res.Claimed == 0 {
			break
		}
	}
	eventually(t, 90*time.Second, "every event in IM", func() bool { return len(fake.EventIDCounts()) >= events })
	eventually(t, 30*time.Second, "every row IM-published by the bridge", func() bool {
		st, err := s.OutboxStats(ctx)
		return err == nil && st.Pending == 0
	})
	// The relay then finds nothing to send.
	relayDeps := relay.Deps{Store: s, Publisher: pub, NodeID: "n1", Logger: quiet, Config: cfg}
	if res, err := relay.ProcessBatch(ctx, relayDeps); err != nil || res.Claimed != 0 {
		t.Fatalf("relay after the bridge: %+v %v, want nothing claimed", res, err)
	}
	// The bridge's messages once more, as after a consumer restart: every
	// row is published now, so none is sent again.
	for _, id := range ids[:200] {
		row, err := s.GetOutbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(row.Envelope)
		if err := relay.BridgeIM(ctx, deps, data); err != nil {
			t.Fatal(err)
		}
	}
	// The two paths racing for 200 new pending rows, one room each: the
	// relay's batch and the bridge's sends at the same time.
	for i := range 200 {
		id := fmt.Sprint("race", i)
		if err := pub.EnsureGroup(ctx, "br", id, "", ""); err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(room.RoomUserJoined{UserID: "x", JoinedAtMs: 1})
		env := persistence.Envelope{EventID: room.EventID("br", id, 1, 0), EventType: room.TypeRoomUserJoined,
			AppCode: "br", RoomID: id, RoomSeq: 1, CommandID: id, CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
		if err := s.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "br", RoomID: id, Seq: 1, CommandID: id,
			CommandType: room.CmdJoinRoom, CreatedAtMs: env.CreatedAtMs, Events: []persistence.Envelope{env}}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.EventID)
	}
	raced := make(chan error, 1)
	go func() {
		_, err := relay.ProcessBatch(ctx, relayDeps)
		raced <- err
	}()
	for _, id := range ids[events:] {
		row, err := s.GetOutbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(row.Envelope)
		if err := relay.BridgeIM(ctx, deps, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-raced; err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	counts := fake.EventIDCounts()
	doubled := 0
	for i, id := range ids {
		switch {
		case i < events && counts[id] != 1:
			t.Fatalf("%s reached its IM group %d times, want exactly 1", id, counts[id])
		case counts[id] < 1 || counts[id] > 2:
			t.Fatalf("%s (raced) reached its IM group %d times, want 1, at most 2", id, counts[id])
		case counts[id] == 2:
			doubled++
		}
		row, err := s.GetOutbox(ctx, id)
		if err != nil || row.Status != persistence.OutboxPublished {
			t.Fatalf("%s: %+v %v, want IM-published", id, row.Status, err)
		}
	}
	if err := relay.BridgeIM(ctx, deps, []byte("{not json")); !errors.Is(err, relay.ErrCorruptEnvelope) {
		t.Fatalf("a corrupt message: %v", err)
	}
	t.Logf("%d events through the bridge alone: each reached IM once; 200 raced with the relay: %d reached their group twice (clients drop it by event_id); %d group sends, %d dropped by IM's dedupe",
		events, doubled, fake.CallCount(tencentim.APISendGroupMsg), fake.Duplicates())
}
