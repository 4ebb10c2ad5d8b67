package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// An outage of one room database tells the caller which database, and
// nothing else of the error's text; any other outage stays generic.
func TestUnavailableNamesOnlyTheRoomDatabase(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	one := persistence.InRoomDB("b", fmt.Errorf("%w: the room store is unreachable: command not run, retry", errclass.Unavailable))
	st, _ := status.FromError(toStatus(context.Background(), log, one))
	if st.Code() != codes.Unavailable || st.Message() != unavailableMsg+` (room database "b")` {
		t.Fatalf("one database down: %v %q", st.Code(), st.Message())
	}
	leak := persistence.InRoomDB(`x" pass=`, fmt.Errorf("%w: dial tcp 10.0.0.7:3306 root:secret", errclass.Unavailable))
	st, _ = status.FromError(toStatus(context.Background(), log, leak))
	if st.Message() != unavailableMsg || strings.Contains(st.Message(), "10.0.0.7") {
		t.Fatalf("a key outside the allowed characters or an address reached the caller: %q", st.Message())
	}
	st, _ = status.FromError(toStatus(context.Background(), log, fmt.Errorf("%w: %w", errclass.Unavailable, errors.New("dial tcp 10.0.0.7:3306"))))
	if st.Message() != unavailableMsg {
		t.Fatalf("generic outage: %q", st.Message())
	}
	// The key is read from the typed error only: the same words in an
	// error's text name no database.
	prose := fmt.Errorf("%w: the room store is unreachable (room database %q)", errclass.Unavailable, "b")
	st, _ = status.FromError(toStatus(context.Background(), log, prose))
	if st.Message() != unavailableMsg {
		t.Fatalf("a key was read back from the text: %q", st.Message())
	}
	// A coded outage of one database says which in its ErrorInfo too.
	if errclass.Lookup(errclass.CodeRoomStoreDown) == nil {
		t.Fatal("no error declares ROOM_STORE_DOWN in this binary")
	}
	down := persistence.InRoomDB("b", fmt.Errorf("room r1: %w", errclass.Lookup(errclass.CodeRoomStoreDown)))
	st, _ = status.FromError(toStatus(context.Background(), log, down))
	var meta map[string]string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			meta = info.GetMetadata()
		}
	}
	if meta["room_db"] != "b" || meta["code"] != fmt.Sprint(uint32(errclass.CodeRoomStoreDown)) {
		t.Fatalf("store-down metadata %v", meta)
	}
}
