package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// A snapshot over the server's max_allowed_packet (a private mariadbd
// at 64 KiB) is refused, and the connection the server closes for it is
// not handed to what comes next: the room's appends and reads right
// after it, on a pool of one connection, all succeed.
func TestSnapshotOverMaxAllowedPacketLeavesThePoolUsable(t *testing.T) {
	srv := mysqltest.StartServer(t)
	dc, err := driverMySQL.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := driverMySQL.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	admin := sql.OpenDB(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "SET GLOBAL max_allowed_packet = 65536"); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	cfg, _ := mysqltest.NewDatabaseOn(t, srv.DSN)
	cfg.MaxOpenConns, cfg.MaxIdleConns = 1, 1
	s, err := Open(ctx, cfg, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	key := persistence.RoomKey{AppCode: "app", RoomID: "big"}
	big := persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: 1, State: bytes.Repeat([]byte("x"), 256<<10), UpdatedAtMs: 1}
	for seq := int64(1); seq <= 60; seq++ {
		big.Seq = seq
		if err := s.SaveSnapshot(ctx, big); !isPacketTooBig(err) {
			t.Fatalf("a 256 KiB snapshot at a 64 KiB packet: %v", err)
		}
		c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: fmt.Sprintf("c%d", seq),
			CommandType: "JoinRoom", RequestHash: fmt.Sprintf("%064d", seq), Reply: []byte("r"), CreatedAtMs: seq}
		if err := s.Append(ctx, persistence.Append{Command: c}); err != nil {
			t.Fatalf("append at seq %d after the refused snapshot: %v", seq, err)
		}
		if _, err := s.LoadSnapshot(ctx, key); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("load after the refused snapshot: %v", err)
		}
	}
	small := persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: 60, State: []byte(`{}`), UpdatedAtMs: 60}
	if err := s.SaveSnapshot(ctx, small); err != nil {
		t.Fatalf("a small snapshot after: %v", err)
	}
}
