package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/errclass"
)

// An outage of one room database tells the caller which database, and
// nothing else of the error's text; any other outage stays generic.
func TestUnavailableNamesOnlyTheRoomDatabase(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	one := fmt.Errorf("%w: the room store is unreachable: command not run, retry (room database %q)", errclass.Unavailable, "b")
	st, _ := status.FromError(toStatus(context.Background(), log, one))
	if st.Code() != codes.Unavailable || st.Message() != unavailableMsg+` (room database "b")` {
		t.Fatalf("one database down: %v %q", st.Code(), st.Message())
	}
	leak := fmt.Errorf("%w: dial tcp 10.0.0.7:3306 root:secret (room database %q)", errclass.Unavailable, `x" pass=`)
	st, _ = status.FromError(toStatus(context.Background(), log, leak))
	if st.Message() != unavailableMsg || strings.Contains(st.Message(), "10.0.0.7") {
		t.Fatalf("a key outside the allowed characters or an address reached the caller: %q", st.Message())
	}
	st, _ = status.FromError(toStatus(context.Background(), log, fmt.Errorf("%w: %w", errclass.Unavailable, errors.New("dial tcp 10.0.0.7:3306"))))
	if st.Message() != unavailableMsg {
		t.Fatalf("generic outage: %q", st.Message())
	}
}
