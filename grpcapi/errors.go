package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// classCodes maps the error vocabulary (errclass) to status codes. Every
// server of this package returns vocabulary errors (room, wallet, notice
// and store errors all wrap one class) and toStatus maps them here, once.
// Unavailable is not in the table: it gets a generic text and a log line,
// and keeps its code and retry hint (a refusal such as NO_COORDINATOR
// says which and when).
var classCodes = map[error]codes.Code{
	errclass.Invalid:      codes.InvalidArgument,
	errclass.NotFound:     codes.NotFound,
	errclass.Exists:       codes.AlreadyExists,
	errclass.Precondition: codes.FailedPrecondition,
	errclass.Permission:   codes.PermissionDenied,
	// A lost race the server did not retry itself: the caller may.
	errclass.Conflict: codes.Aborted,
	// A rate limit or a full room; a rate limit's status carries when to
	// retry (withRetry).
	errclass.Exhausted: codes.ResourceExhausted,
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
	if errors.Is(err, errNoToken) {
		// Permission by class, but the caller showed no identity at all:
		// Unauthenticated (HTTP 401), the code clients retry with a token.
		return withCode(status.New(codes.Unauthenticated, strings.TrimPrefix(err.Error(), class.Error()+": ")), err).Err()
	}
	if code, ok := classCodes[class]; ok {
		// The code already says "not found"; the caller wants the rest.
		return withRetry(withCode(status.New(code, strings.TrimPrefix(err.Error(), class.Error()+": ")), err), err).Err()
	}
	if class == errclass.Unavailable {
		log.WarnContext(ctx, "command unavailable", "request_id", RequestIDFrom(ctx), "err", err)
		// The text may name a server (only a room database's key is
		// added); the code and the delay may not.
		return withRetry(withCode(status.New(codes.Unavailable, unavailableMsg+roomDBSuffix(err)), err), err).Err()
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

// errorDomain is the domain of the google.rpc.ErrorInfo detail that
// carries an error's code (errclass's code table) in a status.
const errorDomain = "roomcell"

// withCode adds err's code to st as an ErrorInfo detail: reason the code's
// name, metadata "code" its number and the facts the error carries
// (errclass.WithMeta, the room database of an outage: docs/errors.md). A caller (a room node with a remote
// wallet, an app backend) branches on it, never on the text.
func withCode(st *status.Status, err error) *status.Status {
	code := errclass.CodeOf(err)
	if code == 0 {
		return st
	}
	md := map[string]string{"code": strconv.FormatUint(uint64(code), 10)}
	for k, v := range errclass.MetaOf(err) {
		if k != "code" {
			md[k] = v
		}
	}
	if key := roomDBOf(err); key != "" {
		md[persistence.RoomDBMetaKey] = key
	} else {
		delete(md, persistence.RoomDBMetaKey) // not a key a caller may learn
	}
	d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: code.String(), Domain: errorDomain, Metadata: md})
	if derr != nil {
		return st
	}
	return d
}

// withRetry adds err's retry-after (errclass.WithRetryAfter) to st as a
// google.rpc.RetryInfo detail, the standard place clients and gRPC
// retry policies look for it.
func withRetry(st *status.Status, err error) *status.Status {
	d, ok := errclass.RetryAfterOf(err)
	if !ok {
		return st
	}
	r, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if derr != nil {
		return st
	}
	return r
}

// rowStatus is the status of code's row of errclass's table: its gRPC
// code, its message (args fill the template) and an ErrorInfo with its
// reason, its number and meta. For the refusals that are not an error
// value of a class (the event log's resync and resume signals).
func rowStatus(code errclass.Code, meta map[string]string, args ...any) *status.Status {
	row, _ := errclass.Info(code)
	msg := row.Message
	if len(args) > 0 {
		msg = fmt.Sprintf(row.Message, args...)
	}
	md := map[string]string{"code": strconv.FormatUint(uint64(code), 10)}
	for k, v := range meta {
		md[k] = v
	}
	st := status.New(grpcCode(row.GRPC), msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: row.Name, Domain: errorDomain, Metadata: md}); err == nil {
		return d
	}
	return st
}

// grpcCode is the status code of a row's GRPC name ("OUT_OF_RANGE");
// Unknown for a name grpc does not know (errgen admits none).
func grpcCode(name string) codes.Code {
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(strconv.Quote(name))); err != nil {
		return codes.Unknown
	}
	return c
}

// codeOf returns the code a status carries (withCode), 0 when none.
func codeOf(st *status.Status) errclass.Code {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			if n, err := strconv.ParseUint(info.GetMetadata()["code"], 10, 32); err == nil {
				return errclass.Code(n)
			}
		}
	}
	return 0
}

// internalStatus says nothing about the cause, only how to find it in the
// log.
func internalStatus(requestID string) error {
	if requestID == "" {
		return status.Error(codes.Internal, "internal error")
	}
	return status.Error(codes.Internal, "internal error (request_id "+requestID+")")
}
