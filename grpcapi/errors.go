package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/hyapp/roomcell/actors/room"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classCodes maps the error classes of actors/room to status codes. The
// sentinel is kept so its text can be trimmed from the message: the code
// already says "not found", the caller wants the rest.
var classCodes = map[string]struct {
	code     codes.Code
	sentinel error
}{
	room.ClassInvalid:      {codes.InvalidArgument, room.ErrInvalid},
	room.ClassNotFound:     {codes.NotFound, room.ErrNotFound},
	room.ClassExists:       {codes.AlreadyExists, room.ErrExists},
	room.ClassPrecondition: {codes.FailedPrecondition, room.ErrPrecondition},
	room.ClassPermission:   {codes.PermissionDenied, room.ErrPermission},
}

// unavailableMsg is all a caller learns about an outage: the detail (store
// address, driver text) stays in the log.
const unavailableMsg = "temporarily unavailable; retry with the same command_id"

// toStatus is the only place in roomcell that turns an error into a gRPC
// status. Rule errors keep their text (it is written for callers);
// outages and unknown errors get a generic text and are logged in full.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	class := room.ClassOf(err)
	if c, ok := classCodes[class]; ok {
		msg := strings.TrimPrefix(err.Error(), c.sentinel.Error()+": ")
		return status.Error(c.code, msg)
	}
	if class == room.ClassUnavailable {
		log.WarnContext(ctx, "command unavailable", "request_id", RequestIDFrom(ctx), "err", err)
		return status.Error(codes.Unavailable, unavailableMsg)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded; retry with the same command_id")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	}
	// An error already shaped for callers (e.g. from another gRPC call)
	// keeps its code, unless the code says nothing but "something broke".
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown && st.Code() != codes.Internal {
		return st.Err()
	}
	id := RequestIDFrom(ctx)
	log.ErrorContext(ctx, "internal error", "request_id", id, "err", err)
	return internalStatus(id)
}

// internalStatus says nothing about the cause, only how to find it in the
// log.
func internalStatus(requestID string) error {
	if requestID == "" {
		return status.Error(codes.Internal, "internal error")
	}
	return status.Error(codes.Internal, "internal error (request_id "+requestID+")")
}
