package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// The notice service with real processes: two notice-only roomcell processes against
// one MariaDB and a backlog of 10,000 WalletBalanceChanged rows, both
// sending to one fake Tencent IM run by this test. One process is killed
// with SIGKILL mid-run. Every event is still delivered (its leased rows
// come back after lock_ttl) and the repeated sends are counted.
func TestNoticeTwoProcessesOneKilledDeliverEveryEvent(t *testing.T) {
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mcfg, database := mysqltest.NewDatabase(t)
	for _, schema := range []string{mysql.WalletSchema, mysql.NoticeSchema} {
		if err := mysql.MigrateConfig(ctx, mcfg, schema, database); err != nil {
			t.Fatal(err)
		}
	}
	db, err := mysql.OpenDB(ctx, mcfg, database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const events = 10_000
	ids, err := noticetest.InsertWalletBacklog(ctx, db, database, 0, events, 1000)
	if err != nil {
		t.Fatal(err)
	}

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
notice:
  wallet_notice_worker: {enabled: true, poll_interval: "100ms", batch_size: 200, lock_ttl: "3s", send_timeout: "1s"}
`, mcfg.DSN, database, database, database, im.SDKAppID, im.SecretKey, im.AdminIdentifier, im.BaseURL)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	survivor := startChild(t, bin, config, freeAddr(t), freeAddr(t))
	victim := startChild(t, bin, config, freeAddr(t), freeAddr(t))
	_ = survivor

	waitUntil(t, 2*time.Minute, "2,000 notices sent", func() bool { return fake.CallCount(tencentim.APISendMsg) >= 2000 })
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	killedAt := time.Now()
	sentBefore := fake.CallCount(tencentim.APISendMsg)

	waitUntil(t, 3*time.Minute, "every event delivered after the kill", func() bool {
		counts := fake.EventIDCounts()
		for _, id := range ids {
			if counts[id] == 0 {
				return false
			}
		}
		return true
	})
	recovered := time.Since(killedAt)
	counts := fake.EventIDCounts()
	extra := 0
	for _, id := range ids {
		extra += counts[id] - 1
	}
	dups := extra + fake.Duplicates()
	var delivered int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+database+"`.notice_delivery_events WHERE status = 'delivered'").Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed one of two notice processes after %d sends; all %d events delivered %s later; %d repeated sends (%d dropped by the IM dedupe window, %d reached users); %d rows delivered",
		sentBefore, events, recovered.Round(time.Millisecond), dups, fake.Duplicates(), extra, delivered)
	waitUntil(t, 30*time.Second, "every delivery row marked delivered", func() bool {
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+database+"`.notice_delivery_events WHERE status = 'delivered'").Scan(&delivered)
		return err == nil && delivered == events
	})
	if dups > 2*200 {
		t.Fatalf("%d repeated sends: more than the killed process's leased batches", dups)
	}
}
