package walletnotice_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// Seed 003's real-database verification ("真实库验证"):
//
//	NOTICE_REAL_MYSQL_DSN='root@tcp(127.0.0.1:3306)/hyapp_notice?parseTime=true&charset=utf8mb4&loc=UTC' \
//	NOTICE_REAL_WALLET_DATABASE=hyapp_wallet \
//	go test ./actors/notice/walletnotice -run TestMySQLRepositoryProcessesRealWalletOutbox -count=1 -v
//
// It writes one real WalletBalanceChanged into wallet_outbox through a
// wallet transaction, lets the wallet notice worker take it from MySQL
// with a fake publisher in place of Tencent IM, and checks that
// notice_delivery_events holds it delivered with the final client payload.
// The DSN names the notice database; both schemas are migrated there if
// missing (idempotent). The worker files its rows and cursor under a
// source_name of its own and reads only its event, so a live service on
// the same database is not disturbed. NOTICE_REAL_MYSQL_KEEP_ROWS=true
// keeps the rows for inspection. Without the variables it runs the same
// on a throwaway database.
func TestMySQLRepositoryProcessesRealWalletOutbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cfg configs.MySQLConfig
	if dsn := os.Getenv("NOTICE_REAL_MYSQL_DSN"); dsn != "" {
		dc, err := driverMySQL.ParseDSN(dsn)
		if err != nil {
			t.Fatal("NOTICE_REAL_MYSQL_DSN does not parse") // it may hold a password
		}
		cfg.DSN, cfg.NoticeDatabase = dsn, dc.DBName
		if cfg.NoticeDatabase == "" {
			cfg.NoticeDatabase = "hyapp_notice"
		}
		cfg.WalletDatabase = os.Getenv("NOTICE_REAL_WALLET_DATABASE")
		if cfg.WalletDatabase == "" {
			cfg.WalletDatabase = "hyapp_wallet"
		}
		cfg.AutoMigrate = true
		t.Logf("real database: notice %s, wallet %s", cfg.NoticeDatabase, cfg.WalletDatabase)
	} else {
		cfg, _ = mysqltest.NewDatabase(t)
		t.Logf("NOTICE_REAL_MYSQL_DSN unset: throwaway database %s", cfg.NoticeDatabase)
	}
	keep := os.Getenv("NOTICE_REAL_MYSQL_KEEP_ROWS") == "true"

	if err := mysql.MigrateConfig(ctx, cfg, mysql.WalletSchema, cfg.WalletDatabase); err != nil {
		t.Fatal(err)
	}
	ws, err := mysql.OpenWalletStore(ctx, cfg, mysql.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	ns, err := mysql.OpenNoticeStore(ctx, cfg, mysql.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })

	var b [5]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	user, source := "nv_"+suffix, "wallet_outbox_verify_"+suffix

	// A real wallet transaction writes the real row.
	svc, err := wallet.NewService(ws, configs.DefaultGifts(), configs.WalletConfig{}, wallet.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	credit, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "lalu", CommandID: "nv_cmd_" + suffix, UserID: user, AssetType: wallet.AssetCoin, Amount: 9900})
	if err != nil {
		t.Fatal(err)
	}
	eventID := persistence.BalanceEventID(credit.TransactionID, user, wallet.AssetCoin)
	var rowID int64
	if err := ns.DB().QueryRowContext(ctx, "SELECT id FROM `"+cfg.WalletDatabase+"`.wallet_outbox WHERE event_id = ?", eventID).Scan(&rowID); err != nil {
		t.Fatalf("wallet_outbox row of %s: %v", eventID, err)
	}
	if !keep {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, q := range []struct {
				sql string
				arg string
			}{
				{"DELETE FROM `" + cfg.WalletDatabase + "`.wallet_outbox WHERE user_id = ?", user},
				{"DELETE FROM `" + cfg.WalletDatabase + "`.wallet_ledger WHERE user_id = ?", user},
				{"DELETE FROM `" + cfg.WalletDatabase + "`.wallet_accounts WHERE user_id = ?", user},
				{"DELETE FROM `" + cfg.WalletDatabase + "`.wallet_transactions WHERE transaction_id = ?", credit.TransactionID},
				{"DELETE FROM notice_delivery_events WHERE source_name = ?", source},
				{"DELETE FROM notice_source_cursors WHERE source_name = ?", source},
			} {
				if _, err := ns.DB().ExecContext(ctx, q.sql, q.arg); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		})
	} else {
		t.Logf("keeping rows: wallet_outbox event_id %s, notice_delivery_events source_name %s", eventID, source)
	}

	// The worker reads wallet_outbox by qualified name through the notice
	// pool, but only this test's event.
	only := onlyEvent{src: ns.WalletOutbox(), fromID: rowID - 1, eventID: eventID}
	pub := &recorder{}
	w, err := notice.NewWorker(notice.Deps{
		Store: ns, Publisher: pub, NodeID: "verify", Logger: noticetest.Quiet,
		Config: configs.WithDefaults(configs.NoticeWorkerConfig{Enabled: true, PollInterval: 500 * time.Millisecond, BatchSize: 100, LockTTL: 30 * time.Second, MaxRetryCount: 10}),
		Module: walletnotice.Module(only, walletnotice.WithSourceName(source), walletnotice.WithLogger(noticetest.Quiet)),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ingested != 1 || res.Claimed != 1 || res.Delivered != 1 {
		t.Fatalf("round %+v, want the one event ingested, claimed and delivered", res)
	}
	if len(pub.sent) != 1 || pub.sent[0].user != user || pub.sent[0].ext != walletnotice.ExtWalletNotice || pub.sent[0].eventID != eventID {
		t.Fatalf("fake publisher got %+v", pub.sent)
	}
	row, err := ns.Get(ctx, persistence.NoticeKey{SourceName: source, AppCode: "lalu", SourceEventID: eventID, Channel: persistence.ChannelIMC2C})
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != persistence.NoticeDelivered || row.DeliveredAtMs == 0 || row.UserID != user || row.Ext != walletnotice.ExtWalletNotice {
		t.Fatalf("notice_delivery_events row %+v", row)
	}
	var p wallet.BalanceChanged
	if err := json.Unmarshal(row.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.EventID != eventID || p.UserID != user || p.TransactionID != credit.TransactionID || p.AvailableDelta != 9900 ||
		p.AvailableAfter != 9900 || p.BalanceVersion != 1 || p.AssetType != wallet.AssetCoin || string(row.Payload) != pub.sent[0].data {
		t.Fatalf("stored payload %s (sent %s)", row.Payload, pub.sent[0].data)
	}
	// The owner row is untouched: notice never writes wallet_outbox.
	var status string
	if err := ns.DB().QueryRowContext(ctx, "SELECT status FROM `"+cfg.WalletDatabase+"`.wallet_outbox WHERE event_id = ?", eventID).Scan(&status); err != nil || status != persistence.OutboxPending {
		t.Fatalf("wallet_outbox status %q %v, want pending (untouched)", status, err)
	}
}

// onlyEvent reads the real wallet_outbox from just before one row and
// hides every other row.
type onlyEvent struct {
	src     walletnotice.Source
	fromID  int64
	eventID string
}

func (o onlyEvent) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
	rows, err := o.src.ListOutboxAfter(ctx, max(afterID, o.fromID), limit)
	var out []persistence.WalletOutboxRecord
	for _, r := range rows {
		if r.EventID == o.eventID {
			out = append(out, r)
		}
	}
	return out, err
}

type sentNotice struct{ app, user, ext, data, eventID string }

type recorder struct{ sent []sentNotice }

func (r *recorder) SendNotice(_ context.Context, appCode, toUserID, ext string, data []byte, eventID string) error {
	r.sent = append(r.sent, sentNotice{appCode, toUserID, ext, string(data), eventID})
	return nil
}
