package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/hyapp/roomcell/errclass"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classCodes maps the error vocabulary (errclass) to status codes. Every
// server of this package returns vocabulary errors (room, wallet, notice
// and store errors all wrap one class) and toStatus maps them here, once.
// Unavailable is not in the table: it gets a generic text and a log line.
var classCodes = map[error]codes.Code{
	errclass.Invalid:      codes.InvalidArgument,
	errclass.NotFound:     codes.NotFound,
	errclass.Exists:       codes.AlreadyExists,
	errclass.Precondition: codes.FailedPrecondition,
	errclass.Permission:   codes.PermissionDenied,
	// A lost race the server did not retry itself: the caller may.
	errclass.Conflict: codes.Aborted,
}

// unavailableMsg is all a caller learns about an outage: the detail (store
// address, driver text) stays in the log.
const unavailableMsg = "temporarily unavailable; retry with the same command_id"

// toStatus is the only place in roomcell that turns an error into a gRPC
// status; every server of this package ends its error paths in it. Rule
// errors keep their text (it is written for callers); outages and unknown
// errors get a generic text and are logged in full.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	class := errclass.Of(err)
	if code, ok := classCodes[class]; ok {
		// The code already says "not found"; the caller wants the rest.
		return status.Error(code, strings.TrimPrefix(err.Error(), class.Error()+": "))
	}
	if class == errclass.Unavailable {
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
