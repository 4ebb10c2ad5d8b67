package noticetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
)

// Quiet is a logger that drops everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// FakeIM starts the fake Tencent IM on loopback and returns it with a
// roomim publisher that reaches it over HTTP through the real Tencent IM
// client, with the client's rate limits raised out of the way (Tencent's
// 200 calls/s per API would otherwise be what a test measures). Both are
// closed at the end of the test.
func FakeIM(t testing.TB) (*imfake.Server, *roomim.Publisher) {
	t.Helper()
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	cfg := fake.ClientConfig()
	cfg.RatePerSecond, cfg.GroupRatePerSecond = 1_000_000, 1_000_000
	client, err := tencentim.New(cfg, tencentim.WithLogger(Quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(Quiet))
	t.Cleanup(pub.Close)
	return fake, pub
}

// BalanceEvent is a WalletBalanceChanged as the wallet writes it: the
// outbox row and its seed-003 payload. Event n of user u has
// balance_version n/users+1.
func BalanceEvent(n, users int, nowMs int64) persistence.WalletOutboxEvent {
	user := fmt.Sprintf("u%04d", n%users)
	tx := fmt.Sprintf("wtx_%07d", n)
	p := wallet.BalanceChanged{
		EventType: persistence.EventBalanceChanged, EventID: persistence.BalanceEventID(tx, user, wallet.AssetCoin), AppCode: "lalu",
		TransactionID: tx, CommandID: "gift_cmd_" + tx, UserID: user, AssetType: wallet.AssetCoin,
		AvailableDelta: -100, AvailableAfter: 1_000_000 - int64(n/users+1)*100, BalanceVersion: int64(n/users + 1),
		CreatedAtMs: nowMs, SourceCreatedAtMs: nowMs, Metadata: map[string]string{"gift_id": "rose"},
	}
	b, _ := json.Marshal(p)
	return persistence.WalletOutboxEvent{EventID: p.EventID, AppCode: p.AppCode, UserID: user, EventType: p.EventType, Payload: b}
}

// InsertWalletBacklog writes events WalletBalanceChanged rows (numbered
// from first) into `database`.wallet_outbox in multi-row INSERTs, the
// way committed wallet transactions leave them: a backlog for the notice
// worker without running the wallet. It returns their event ids.
func InsertWalletBacklog(ctx context.Context, db *sql.DB, database string, first, events, users int) ([]string, error) {
	const chunk = 500
	now := time.Now().UnixMilli()
	ids := make([]string, 0, events)
	for start := first; start < first+events; start += chunk {
		var q strings.Builder
		q.WriteString("INSERT INTO `" + database + "`.wallet_outbox (event_id, app_code, user_id, event_type, payload, status, created_at_ms, updated_at_ms) VALUES ")
		var args []any
		for n := start; n < min(start+chunk, first+events); n++ {
			if n > start {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,'pending',?,?)")
			e := BalanceEvent(n, users, now)
			args = append(args, e.EventID, e.AppCode, e.UserID, e.EventType, string(e.Payload), now, now)
			ids = append(ids, e.EventID)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
