package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/grpcapi/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func assertCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code %v (%v), want %v", got, err, want)
	}
}

func TestErrorClassesMapToCodes(t *testing.T) {
	const secret = "tcp 10.0.0.9:3306 user=root password=hunter2"
	cases := []struct {
		name    string
		err     error
		code    codes.Code
		msg     string // the status message must contain it
		notInIt string // and must not contain it
	}{
		{"invalid", fmt.Errorf("decide: %w", room.ErrInvalid), codes.InvalidArgument, "", ""},
		{"room not found", room.ErrRoomNotFound, codes.NotFound, "room does not exist", "not found:"},
		{"room exists", room.ErrRoomExists, codes.AlreadyExists, "room already exists", ""},
		{"closed", room.ErrRoomClosed, codes.FailedPrecondition, "room is closed", ""},
		{"seat taken", fmt.Errorf("take mic: %w", room.ErrSeatTaken), codes.FailedPrecondition, "seat is taken", ""},
		{"not owner", room.ErrNotOwner, codes.PermissionDenied, "only the owner or an admin", ""},
		{"class from another member", room.ErrorFromClass(room.ClassPrecondition, room.ErrBanned.Error()), codes.FailedPrecondition, "user is banned", "failed precondition:"},
		{"store down", fmt.Errorf("%w: append: %s", room.ErrUnavailable, secret), codes.Unavailable, "retry", "hunter2"},
		{"cluster timeout", fmt.Errorf("%w: %w", room.ErrUnavailable, context.DeadlineExceeded), codes.Unavailable, "retry", ""},
		{"deadline", fmt.Errorf("request grain: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "deadline", ""},
		{"canceled", context.Canceled, codes.Canceled, "", ""},
		{"unknown", errors.New("driver: " + secret), codes.Internal, "internal error", "hunter2"},
		{"unknown class from another member", room.ErrorFromClass(room.ClassInternal, secret), codes.Internal, "internal error", "hunter2"},
		{"status passes through", status.Error(codes.ResourceExhausted, "slow down"), codes.ResourceExhausted, "slow down", ""},
		{"internal status is hidden", status.Error(codes.Internal, secret), codes.Internal, "internal error", "hunter2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
				return nil, tc.err
			}}
			logs := &syncBuffer{}
			client := roomcellv1.NewRoomServiceClient(startServer(t, Options{Logger: newTextLogger(logs)}, b))
			_, err := client.JoinRoom(testCtx(t), &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"})
			assertCode(t, err, tc.code)
			msg := status.Convert(err).Message()
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q does not contain %q", msg, tc.msg)
			}
			if tc.notInIt != "" && strings.Contains(msg, tc.notInIt) {
				t.Errorf("message %q leaks %q", msg, tc.notInIt)
			}
			if tc.code == codes.Internal && !strings.Contains(logs.String(), "internal error") {
				t.Errorf("internal error not logged; log: %s", logs.String())
			}
		})
	}
}

func TestNilReplyIsInternal(t *testing.T) {
	b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		return nil, nil
	}}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
	_, err := client.JoinRoom(testCtx(t), &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"})
	assertCode(t, err, codes.Internal)
}

func TestToStatusNil(t *testing.T) {
	if err := toStatus(context.Background(), discardLogger(), nil); err != nil {
		t.Fatalf("toStatus(nil) = %v", err)
	}
}

// Every domain's errors are in the one vocabulary, so errors.Is against a
// class and toStatus agree whichever package made the error. A domain
// sentinel that stops wrapping its class (or a class that loses its code)
// fails here.
func TestEveryDomainSpeaksTheVocabulary(t *testing.T) {
	const secret = "dsn root:hunter2@tcp(10.0.0.9)"
	for _, tc := range []struct {
		name  string
		err   error
		class error
		code  codes.Code
	}{
		{"room rule", room.ErrSeatTaken, errclass.Precondition, codes.FailedPrecondition},
		{"room rule from another member", room.ErrorFromClass(room.ClassPermission, room.ErrKickAdmin.Error()), errclass.Permission, codes.PermissionDenied},
		{"room input", fmt.Errorf("%w: seat_index 9", room.ErrInvalid), errclass.Invalid, codes.InvalidArgument},
		{"wallet balance", fmt.Errorf("%w: 5 COIN", wallet.ErrInsufficientBalance), errclass.Precondition, codes.FailedPrecondition},
		{"wallet command_id reused", fmt.Errorf("%w: other gift", wallet.ErrConflict), errclass.Exists, codes.AlreadyExists},
		{"wallet down", fmt.Errorf("%w: %s", wallet.ErrUnavailable, secret), errclass.Unavailable, codes.Unavailable},
		{"store down", fmt.Errorf("mysql: append: %w: %s", persistence.ErrUnavailable, secret), errclass.Unavailable, codes.Unavailable},
		{"store race", fmt.Errorf("memdb: append: %w", persistence.ErrConflict), errclass.Conflict, codes.Aborted},
		{"store row missing", fmt.Errorf("memdb: get: %w", persistence.ErrNotFound), errclass.NotFound, codes.NotFound},
		{"corrupt notice source", fmt.Errorf("%w: envelope", notice.ErrCorruptSource), errclass.Invalid, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.class) || errclass.Of(tc.err) != tc.class {
				t.Fatalf("%v: class %v, want %v", tc.err, errclass.Of(tc.err), tc.class)
			}
			st := toStatus(context.Background(), discardLogger(), tc.err)
			assertCode(t, st, tc.code)
			if strings.Contains(status.Convert(st).Message(), "hunter2") {
				t.Fatalf("status message leaks the outage detail: %q", status.Convert(st).Message())
			}
		})
	}
}
