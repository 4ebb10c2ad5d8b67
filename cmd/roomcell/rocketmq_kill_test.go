//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq/rocketmqtest"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// A notice-only roomcell process, configured with seed 003's own rocketmq
// block (secrets from the environment), consumes 3,000 RoomUserKicked
// messages from the machine's broker with group hyapp-notice-room-outbox
// and is SIGKILLed mid-stream; a second process of the same group takes
// over. Every kicked user gets the C2C room_notice (none lost), and none
// gets it twice: messages the killed consumer handled but had not
// committed come again and the notice table's primary key absorbs them;
// a send cut between IM and the mark is retried within IM's dedupe
// window, never reaching the user twice.
func TestRocketMQNoticeConsumerKilledMidStream(t *testing.T) {
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mcfg, database := mysqltest.NewDatabase(t)
	for _, schema := range []string{mysql.WalletSchema, mysql.NoticeSchema, mysql.RoomSchema} {
		if err := mysql.MigrateConfig(ctx, mcfg, schema, database); err != nil {
			t.Fatal(err)
		}
	}
	db, err := mysql.OpenDB(ctx, mcfg, database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	shared := rocketmqtest.Shared()
	topic := shared.Topic(t, "roomcell_kill_")
	group := "hyapp-notice-room-outbox-" + topic
	pub, err := rocketmq.Dial(ctx, shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	fake, err := imfake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	im := fake.ClientConfig()
	config := filepath.Join(t.TempDir(), "notice.yaml")
	yaml := fmt.Sprintf(`roles: [notice]
log: {level: warn}
store: {kind: mysql}
mysql: {dsn: %q, room_database: %q, wallet_database: %q, notice_database: %q, auto_migrate: true}
tencent_im:
  enabled: true
  sdk_app_id: %d
  secret_key: %q
  admin_identifier: %q
  base_url: %q
  rate_per_second: 100000
room_notice_worker:
  enabled: false
  poll_interval: 100ms
  lock_ttl: 3s
  send_timeout: 1s
rocketmq:
  enabled: true
  name_servers:
    - %q
  access_key: "${ROOMCELL_TEST_RMQ_AK}"
  secret_key: "${ROOMCELL_TEST_RMQ_SK}"
  room_outbox:
    enabled: true
    topic: %q
    consumer_group: %q
    consumer_max_reconsume_times: 16
`, mcfg.DSN, database, database, database, im.SDKAppID, im.SecretKey, im.AdminIdentifier, im.BaseURL,
		shared.NameServer(), topic, group)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROOMCELL_TEST_RMQ_AK", shared.AccessKey)
	t.Setenv("ROOMCELL_TEST_RMQ_SK", shared.SecretKey)
	if _, err := configs.Load(config); err != nil {
		t.Fatal(err)
	}

	const kicks = 3000
	ids := make([]string, kicks)
	for i := range kicks {
		roomID, seq := fmt.Sprint("r", i%100), int64(i/100+1)
		payload, _ := json.Marshal(room.RoomUserKicked{TargetUserID: fmt.Sprint("u", i), OperatorUserID: "owner", Reason: "spam"})
		env := persistence.Envelope{EventID: room.EventID("lalu", roomID, seq, 0), EventType: room.TypeRoomUserKicked,
			AppCode: "lalu", RoomID: roomID, RoomSeq: seq, CommandID: fmt.Sprint("kick-", i), CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
		ids[i] = env.EventID
		data, _ := json.Marshal(env)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := pub.PublishOrdered(pctx, topic, env.EventType, env.EventID, "lalu/"+roomID, data)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	victim := startChild(t, bin, config, freeAddr(t), freeAddr(t))
	waitUntil(t, 3*time.Minute, "500 notices sent", func() bool { return fake.CallCount(tencentim.APISendMsg) >= 500 })
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	sentBefore := fake.CallCount(tencentim.APISendMsg)
	killedAt := time.Now()
	startChild(t, bin, config, freeAddr(t), freeAddr(t))

	waitUntil(t, 4*time.Minute, "every kick delivered after the kill", func() bool {
		counts := fake.EventIDCounts()
		for _, id := range ids {
			if counts[id] == 0 {
				return false
			}
		}
		return true
	})
	var delivered int
	waitUntil(t, 60*time.Second, "every notice row delivered", func() bool {
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+database+"`.notice_delivery_events WHERE status = 'delivered'").Scan(&delivered)
		return err == nil && delivered == kicks
	})
	time.Sleep(time.Second)
	counts := fake.EventIDCounts()
	extra := 0
	for i, id := range ids {
		extra += counts[id] - 1
		if msgs := fake.C2CMessages(fmt.Sprint("u", i)); len(msgs) != 1 {
			t.Fatalf("u%d got %d C2C messages, want 1", i, len(msgs))
		}
	}
	t.Logf("killed the consumer after %d sends; all %d kicks delivered %s later; %d repeated sends absorbed by IM's dedupe window, %d reached a user twice",
		sentBefore, kicks, time.Since(killedAt).Round(time.Millisecond), fake.Duplicates(), extra)
	if extra != 0 {
		t.Fatalf("%d notices reached their user twice", extra)
	}
}
