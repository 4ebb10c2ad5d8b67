package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// An outage's status keeps its generic text, and a refusal that knows
// when it ends says so over the wire: NO_COORDINATOR (the room client's
// refusal while etcd has no quorum) and ROOM_STORE_DOWN carry their code
// (ErrorInfo) and a RetryInfo with the room client's delay, whatever the
// error's text held; an outage nobody can time carries no RetryInfo.
func TestUnavailableRefusalsCarryTheirCodeAndWhenToRetry(t *testing.T) {
	const secret = "10.0.0.9:3306 password=hunter2"
	for _, tc := range []struct {
		name  string
		err   error
		code  errclass.Code
		delay time.Duration // 0: no RetryInfo
	}{
		{"no coordinator", errclass.WithRetryAfter(fmt.Errorf("room a/r: %w", roomgrain.ErrNoCoordinator), 500*time.Millisecond), errclass.CodeNoCoordinator, 500 * time.Millisecond},
		{"owner without coordinator", errclass.WithRetryAfter(fmt.Errorf("room a/r: owner %w", errclass.FromCode(errclass.CodeNoCoordinator, "reworded on another node")), time.Second), errclass.CodeNoCoordinator, time.Second},
		{"room store down", errclass.WithRetryAfter(errclass.FromCode(errclass.CodeRoomStoreDown, "store "+secret), 250*time.Millisecond), errclass.CodeRoomStoreDown, 250 * time.Millisecond},
		{"store error", fmt.Errorf("%w: append: %s", errclass.Unavailable, secret), 0, 0},
		{"room did not answer", fmt.Errorf("%w: room a/r did not answer in time: %w", errclass.Unavailable, context.DeadlineExceeded), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
				return nil, tc.err
			}}
			client := roomcellv1.NewRoomServiceClient(startServer(t, Options{Logger: discardLogger()}, b))
			_, err := client.JoinRoom(testCtx(t), &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"})
			st := status.Convert(err)
			if st.Code() != codes.Unavailable || st.Message() != unavailableMsg {
				t.Fatalf("status %v %q, want Unavailable with the generic text", st.Code(), st.Message())
			}
			for _, d := range st.Details() {
				if strings.Contains(fmt.Sprint(d), "hunter2") {
					t.Fatalf("a detail leaks the outage: %v", d)
				}
			}
			if got := codeOf(st); got != tc.code {
				t.Fatalf("status carries code %d (%s), want %d (%s)", got, got, tc.code, tc.code)
			}
			var retry *errdetails.RetryInfo
			for _, d := range st.Details() {
				if r, ok := d.(*errdetails.RetryInfo); ok {
					retry = r
				}
			}
			switch {
			case tc.delay == 0 && retry != nil:
				t.Fatalf("RetryInfo %v on an outage nobody can time", retry.GetRetryDelay().AsDuration())
			case tc.delay != 0 && (retry == nil || retry.GetRetryDelay().AsDuration() != tc.delay):
				t.Fatalf("RetryInfo %v, want a delay of %s", retry, tc.delay)
			}
		})
	}
}
