package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
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
		{"invalid", fmt.Errorf("decide: %w", errclass.Invalid), codes.InvalidArgument, "", ""},
		{"room not found", room.ErrRoomNotFound, codes.NotFound, "room does not exist", "not found:"},
		{"room exists", room.ErrRoomExists, codes.AlreadyExists, "room already exists", ""},
		{"closed", room.ErrRoomClosed, codes.FailedPrecondition, "room is closed", ""},
		{"seat taken", fmt.Errorf("take mic: %w", room.ErrSeatTaken), codes.FailedPrecondition, "seat is taken", ""},
		{"not owner", room.ErrNotOwner, codes.PermissionDenied, "only the owner or an admin", ""},
		{"class from another member", errclass.FromWire(0, errclass.NamePrecondition, room.ErrBanned.Error()), codes.FailedPrecondition, "user is banned", "failed precondition:"},
		{"store down", fmt.Errorf("%w: append: %s", errclass.Unavailable, secret), codes.Unavailable, "retry", "hunter2"},
		{"cluster timeout", fmt.Errorf("%w: %w", errclass.Unavailable, context.DeadlineExceeded), codes.Unavailable, "retry", ""},
		{"deadline", fmt.Errorf("request grain: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "deadline", ""},
		{"canceled", context.Canceled, codes.Canceled, "", ""},
		{"unknown", errors.New("driver: " + secret), codes.Internal, "internal error", "hunter2"},
		{"unknown class from another member", errclass.FromWire(0, errclass.NameInternal, secret), codes.Internal, "internal error", "hunter2"},
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
		{"room rule from another member", errclass.FromWire(errclass.CodeOf(room.ErrKickAdmin), errclass.NamePermission, room.ErrKickAdmin.Error()), errclass.Permission, codes.PermissionDenied},
		{"room input", fmt.Errorf("%w: seat_index 9", errclass.Invalid), errclass.Invalid, codes.InvalidArgument},
		{"wallet balance", fmt.Errorf("%w: 5 COIN", wallet.ErrInsufficientBalance), errclass.Precondition, codes.FailedPrecondition},
		{"wallet command_id reused", fmt.Errorf("%w: other gift", wallet.ErrCommandReused), errclass.Exists, codes.AlreadyExists},
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

// Every code of the table names an error some package declares, and a
// status carries it: the remote side finds the error by its code even
// when the text differs, and never by the text alone.
func TestEveryCodeCrossesAStatus(t *testing.T) {
	all := errclass.Codes()
	if len(all) < 20 {
		t.Fatalf("only %d codes", len(all))
	}
	for _, code := range all {
		e := errclass.Lookup(code)
		if e == nil {
			t.Errorf("code %s (%d) is in the table but no error declares it", code, code)
			continue
		}
		st := status.Convert(toStatus(context.Background(), discardLogger(), fmt.Errorf("detail: %w", errclass.FromCode(code, "reworded"))))
		if got := codeOf(st); got != code {
			t.Errorf("%s: status carries code %d", code, got)
		}
		if _, ok := classCodes[errclass.Of(e)]; !ok {
			continue // an outage: its text says only "retry"; its code is all a caller learns
		}
		if code == errclass.CodeUnauthenticated || code == errclass.CodeOperatorOnly {
			// The door refusing a room node's wallet call is the node's
			// setting at fault: an outage naming it, never a rule error.
			if back := walletError(st.Err()); !errors.Is(back, wallet.ErrUnavailable) || !strings.Contains(back.Error(), "wallet.auth_token") {
				t.Errorf("%s came back as %v", code, back)
			}
			continue
		}
		if back := walletError(st.Err()); !errors.Is(back, e) || errclass.CodeOf(back) != code {
			t.Errorf("%s came back as %v", code, back)
		}
		// The same status without the code: the text alone finds nothing
		// (AlreadyExists is the wallet's reused command_id by its status
		// code alone, as a wallet of an older version sends it).
		bare := status.New(st.Code(), st.Message()).Err()
		if back := walletError(bare); errors.Is(back, e) && st.Code() != codes.AlreadyExists {
			t.Errorf("%s found by its text: %v", code, back)
		}
	}
}

// Every row of the code table is answered with the status and the reason
// the table (and docs/errors.md) says, whichever path answers it: the
// class mapping for the errors of a class, the event log's own statuses
// for its resync and resume signals.
func TestEveryRowAnswersItsStatus(t *testing.T) {
	s := &RoomServer{log: discardLogger()}
	watchLimit := func() error {
		s := &RoomServer{log: discardLogger(), events: roomEvents{}, maxWatch: 0}
		return s.WatchRoom(&roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r"}, bareStream{})
	}
	for _, code := range errclass.Codes() {
		row, _ := errclass.Info(code)
		var err error
		switch code {
		case errclass.CodeRoomEventsTrimmed:
			err = s.eventsStatus(context.Background(), &roomfeed.TrimmedError{After: 1, OldestAfterSeq: 5, HeadSeq: 9})
		case errclass.CodeRoomWatchEnded:
			err = s.eventsStatus(context.Background(), &roomfeed.WatchEndedError{ResumeAfter: 3, Reason: roomfeed.EndMoved})
		case errclass.CodeRoomWatchCut:
			err = s.eventsStatus(context.Background(), &roomfeed.WatchEndedError{ResumeAfter: 3, Cut: true, Reason: roomfeed.EndCut})
		case errclass.CodeRoomWatchLimit:
			err = watchLimit()
		default:
			err = toStatus(context.Background(), discardLogger(), fmt.Errorf("detail: %w", errclass.Lookup(code)))
		}
		st := status.Convert(err)
		if st.Code() != grpcCode(row.GRPC) || grpcCode(row.GRPC) == codes.Unknown {
			t.Errorf("%s: answered %s, the table says %s", row.Name, st.Code(), row.GRPC)
		}
		if got := codeOf(st); got != code {
			t.Errorf("%s: status carries code %d", row.Name, got)
		}
		var reason string
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
				for _, k := range row.Metadata {
					if _, ok := info.GetMetadata()[k]; !ok && (code == errclass.CodeRoomEventsTrimmed || code == errclass.CodeRoomWatchEnded || code == errclass.CodeRoomWatchCut) {
						t.Errorf("%s: metadata %q missing from %v", row.Name, k, info.GetMetadata())
					}
				}
			}
		}
		if reason != row.Name {
			t.Errorf("%s: reason %q", row.Name, reason)
		}
	}
}

// bareStream is a WatchRoom stream that has only a context: enough for a
// refusal before the first send.
type bareStream struct {
	grpc.ServerStreamingServer[roomcellv1.WatchRoomReply]
}

func (bareStream) Context() context.Context { return context.Background() }
