package trtc

import (
	"errors"
	"strings"
)

// Error is a failed TRTC call. Its text carries the action, Tencent's
// error code and a short message; never a key, a signature or a body.
type Error struct {
	Action     string
	Code       string // Tencent's Response.Error.Code, e.g. "InternalError"; "" without a usable answer
	HTTPStatus int    // non-200 gateway status
	Message    string
	RequestID  string
	permanent  bool
	cause      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("trtc ")
	b.WriteString(e.Action)
	b.WriteString(": ")
	if e.Code != "" {
		b.WriteString(e.Code)
	} else {
		b.WriteString("transport")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request ")
		b.WriteString(e.RequestID)
		b.WriteString(")")
	}
	return b.String()
}

// Permanent reports that retrying the same call cannot succeed: Tencent
// refused the request itself (a parameter). The outbox parks the event.
// Auth, permission, quota and outages are not permanent: they are about
// the deployment and clear up when it is fixed.
func (e *Error) Permanent() bool { return e.permanent }

func (e *Error) Unwrap() error { return e.cause }

// CodeOf returns the Tencent error code carried by err, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Codes the client gives a meaning to.
const (
	CodeRoomNotExist = "FailedOperation.RoomNotExist"
)

// permanentCode: Tencent Cloud API 3.0's parameter errors, which are our
// request's fault. Everything else (InternalError.*, RequestLimitExceeded,
// AuthFailure.*, UnauthorizedOperation.*, FailedOperation.* other than a
// missing room, ResourceUnavailable.*, an unknown code) is retried: an
// unknown code parked would stop a room's effects for nothing.
func permanentCode(code string) bool {
	for _, p := range []string{"InvalidParameter", "InvalidParameterValue", "MissingParameter", "UnknownParameter", "UnsupportedOperation"} {
		if code == p || strings.HasPrefix(code, p+".") {
			return true
		}
	}
	return false
}
