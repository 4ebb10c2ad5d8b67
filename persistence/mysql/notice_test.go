package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func newTestNoticeStore(t testing.TB, cfg configs.MySQLConfig) *NoticeStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := OpenNoticeStore(ctx, cfg, WithLogger(quiet))
	if err != nil {
		t.Fatalf("OpenNoticeStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestNoticeStoreContract(t *testing.T) {
	storetest.RunNoticeStore(t, func(t *testing.T) persistence.NoticeStore {
		cfg, _ := mysqltest.NewDatabase(t)
		return newTestNoticeStore(t, cfg)
	})
}

// The notice store reads room_outbox of the room database by qualified
// name, through schema/room's type index, and writes nothing there.
func TestRoomOutboxAfterMariaDB(t *testing.T) {
	storetest.RunRoomOutboxAfter(t, func(t *testing.T) (persistence.Store, storetest.RoomOutboxAfterFunc) {
		room := newTestStore(t, nil)
		cfg, _ := mysqltest.NewDatabase(t)
		// The notice tables in their own database, the room's in another:
		// the reader must use the qualified name.
		var roomDB string
		if err := room.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&roomDB); err != nil {
			t.Fatal(err)
		}
		cfg.RoomDatabase = roomDB
		return room, newTestNoticeStore(t, cfg).RoomOutbox().RoomOutboxAfter
	})
}

// The scan of one event type walks idx_room_outbox_type_created instead of
// the table, on a room_outbox where kicks are rare.
func TestRoomOutboxAfterUsesTypeIndex(t *testing.T) {
	room := newTestStore(t, nil)
	ctx := t.Context()
	for r := range 20 {
		for seq := int64(1); seq <= 30; seq++ {
			if err := room.Append(ctx, testAppend(persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprint("r", r)}, seq, fmt.Sprintf("c%d", seq), false)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := room.DB().ExecContext(ctx, "UPDATE room_outbox SET event_type = 'RoomUserKicked' WHERE room_seq = 7"); err != nil {
		t.Fatal(err)
	}
	if _, err := room.DB().ExecContext(ctx, "ANALYZE TABLE room_outbox"); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, room.DB(), "SELECT "+outboxColumns+" FROM room_outbox"+
		" WHERE event_type = ? AND created_at_ms >= ? AND (created_at_ms > ? OR event_id > ?) ORDER BY created_at_ms, event_id LIMIT ?",
		"RoomUserKicked", 0, 0, "", 100)
	if plan["key"] != "idx_room_outbox_type_created" || strings.Contains(plan["Extra"], "filesort") {
		t.Fatalf("plan does not range-scan the type index without a sort: %v", plan)
	}
}

// WalletOutbox reads what the wallet store wrote, in the wallet's own
// database.
func TestWalletOutboxReaderMatchesWalletStore(t *testing.T) {
	ws := newTestWalletStore(t)
	svc, err := wallet.NewService(ws, configs.DefaultGifts(), configs.WalletConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"u1", "u2", "u3"} {
		if _, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: "lalu", CommandID: "c" + u, UserID: u, AssetType: wallet.AssetCoin, Amount: int64(100 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
	}
	var walletDB string
	if err := ws.db.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&walletDB); err != nil {
		t.Fatal(err)
	}
	cfg, _ := mysqltest.NewDatabase(t)
	cfg.WalletDatabase = walletDB
	r := newTestNoticeStore(t, cfg).WalletOutbox()
	want, err := ws.ListOutboxAfter(t.Context(), 0, 100)
	if err != nil || len(want) != 3 {
		t.Fatalf("wallet store: %d rows, %v", len(want), err)
	}
	got, err := r.ListOutboxAfter(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("reader got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].EventID != want[i].EventID || string(got[i].Payload) != string(want[i].Payload) || got[i].UserID != want[i].UserID {
			t.Fatalf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	page, err := r.ListOutboxAfter(t.Context(), want[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != want[1].ID {
		t.Fatalf("page after %d: %+v %v", want[0].ID, page, err)
	}
}

// The claim walks idx_notice_due for one status and source without a
// sort, on a table where most rows are delivered history.
func TestNoticeClaimUsesDueIndex(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	s := newTestNoticeStore(t, cfg)
	ctx := t.Context()
	var rows []persistence.NoticeDelivery
	for i := range 2000 {
		src := persistence.SourceWalletOutbox
		if i%4 == 0 {
			src = persistence.SourceRoomOutbox
		}
		rows = append(rows, persistence.NoticeDelivery{NoticeKey: persistence.NoticeKey{SourceName: src, AppCode: "lalu", SourceEventID: fmt.Sprint("e", i), Channel: persistence.ChannelIMC2C},
			EventType: "WalletBalanceChanged", UserID: "u", Ext: "wallet_notice", Payload: json.RawMessage(`{}`), Ingress: persistence.IngressPoll, SourceCreatedAtMs: int64(i)})
	}
	if _, err := s.Ingest(ctx, rows, 1); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"UPDATE notice_delivery_events SET status = 'delivered' WHERE source_created_at_ms < 1900",
		"UPDATE notice_delivery_events SET status = 'retryable' WHERE source_created_at_ms >= 1950", "ANALYZE TABLE notice_delivery_events"} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, status := range []string{persistence.NoticeRetryable, persistence.NoticeDelivering} {
		plan := explain(t, s.db, "SELECT "+noticeColumns+" FROM notice_delivery_events WHERE status = ? AND source_name = ?"+
			" AND next_retry_at_ms <= ? AND lock_until_ms <= ? ORDER BY next_retry_at_ms LIMIT 10 FOR UPDATE SKIP LOCKED",
			status, persistence.SourceWalletOutbox, 5000, 5000)
		if plan["key"] != "idx_notice_due" || strings.Contains(plan["Extra"], "filesort") {
			t.Fatalf("claim of %s rows: plan %v", status, plan)
		}
	}
}

// explain returns the first row of EXPLAIN query as column -> value.
func explain(t *testing.T, db *sql.DB, query string, args ...any) map[string]string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	plan := map[string]string{}
	if rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				plan[c] = string(b)
			}
		}
	}
	if len(plan) == 0 {
		t.Fatalf("EXPLAIN gave no plan for %s", query)
	}
	return plan
}

// The notice initdb script and Migrate build the same tables, and Migrate
// after the script applies nothing.
func TestNoticeInitDBScriptBuildsWhatMigrateBuilds(t *testing.T) {
	_, base := mysqltest.NewDatabase(t)
	db := rawDB(t)
	fromScript, fromMigrate := base+"_s", base+"_m"
	dropLater(t, db, fromScript)
	dropLater(t, db, fromMigrate)
	script, err := InitDBScript(NoticeSchema, fromScript)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range SplitStatements(script) {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("initdb statement failed: %v\n%s", err, q)
		}
	}
	_ = conn.Close()
	for _, d := range []string{fromScript, fromMigrate} {
		if err := Migrate(t.Context(), db, NoticeSchema, d); err != nil {
			t.Fatal(err)
		}
	}
	tables := tableNames(t, db, fromMigrate)
	if got := tableNames(t, db, fromScript); !slices.Equal(got, tables) || !slices.Contains(tables, "notice_delivery_events") {
		t.Fatalf("tables from the script %v, from Migrate %v", got, tables)
	}
	for _, table := range tables {
		if a, b := showCreate(t, db, fromScript, table), showCreate(t, db, fromMigrate, table); a != b {
			t.Errorf("%s differs:\nscript:  %s\nmigrate: %s", table, a, b)
		}
	}
}
