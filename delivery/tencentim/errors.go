package tencentim

import (
	"errors"
	"strconv"
	"strings"
)

// Error classes. Every error the client returns is an *Error that matches
// exactly one of ErrRetryable and ErrPermanent; rate-limit errors also
// match ErrRateLimited (and are retryable).
var (
	ErrRetryable   = errors.New("tencent im: retryable")
	ErrPermanent   = errors.New("tencent im: permanent")
	ErrRateLimited = errors.New("tencent im: rate limited")
)

// Class names a row of the guide's §9 table.
type Class string

const (
	ClassTransport      Class = "transport" // no usable response: network, timeout, HTTP status
	ClassTransient      Class = "transient"
	ClassRateLimited    Class = "rate_limited"
	ClassAmbiguous      Class = "ambiguous"
	ClassAuth           Class = "auth"
	ClassNotAdmin       Class = "not_admin"
	ClassAccountMissing Class = "account_missing"
	ClassGroupMissing   Class = "group_missing"
	ClassAlreadyExists  Class = "already_exists"
	ClassBadRequest     Class = "bad_request"
	ClassContent        Class = "content"
	ClassRejected       Class = "rejected"
	ClassAppState       Class = "app_state"
	ClassUnknown        Class = "unknown"
)

// Error is a failed Tencent IM call. Its text is short and never holds
// the secret key, the UserSig or a response body.
type Error struct {
	API        string // e.g. "openim/sendmsg"
	Code       int    // Tencent ErrorCode; 0 when there was no usable response
	HTTPStatus int    // set when the gateway answered with a non-200 status
	Class      Class
	Reason     string
	Retryable  bool
	cause      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("tencent im ")
	b.WriteString(e.API)
	b.WriteString(": ")
	if e.Code != 0 {
		b.WriteString("code ")
		b.WriteString(strconv.Itoa(e.Code))
		b.WriteString(" ")
	}
	b.WriteString("(")
	b.WriteString(string(e.Class))
	b.WriteString(")")
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRetryable / ErrPermanent / ErrRateLimited)
// work on the class.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrRetryable:
		return e.Retryable
	case ErrPermanent:
		return !e.Retryable
	case ErrRateLimited:
		return e.Class == ClassRateLimited
	}
	return false
}

// Unwrap exposes the cause (e.g. context.DeadlineExceeded).
func (e *Error) Unwrap() error { return e.cause }

// CodeOf returns the Tencent ErrorCode carried by err, or 0.
func CodeOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ClassOf returns the class of err, or "" if it is not an *Error.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}

// codeClasses is Tencent's documented error codes as data. Codes not listed are ClassUnknown.
var codeClasses = func() map[int]Class {
	m := map[int]Class{}
	add := func(c Class, codes ...int) {
		for _, code := range codes {
			if _, dup := m[code]; dup {
				panic("tencentim: code listed twice: " + strconv.Itoa(code))
			}
			m[code] = c
		}
	}
	add(ClassTransient, 10002, 20004, 20005, 90992, 90994, 90995, 91000, 70169, 70500, 40006, 30006, 30007, 50004, 50005)
	add(ClassRateLimited, 60007, 60011, 60018, 60019, 10006, 10023)
	add(ClassAmbiguous, 60008, 60014)
	add(ClassAuth, 70001, 70002, 70003, 70005, 70009, 70013, 70014, 70016, 70020, 70052, 60004, 60005, 60006, 70050)
	add(ClassNotAdmin, 60010, 70403, 90009, 10007)
	add(ClassAccountMissing, 20003, 90012, 90048, 10019, 40003, 70107)
	add(ClassGroupMissing, 10010, 10015)
	add(ClassAlreadyExists, 10021, 10025, 10013)
	add(ClassBadRequest, 60002, 60003, 60012, 60015, 90001, 90002, 90003, 90005, 90006, 90007, 90010, 90026, 90031, 90044, 10003, 10004, 10011, 70402)
	add(ClassContent, 80001, 80002, 93000, 90011, 10005, 10014, 10038, 10036, 10037)
	add(ClassRejected, 20006, 10016)
	add(ClassAppState, 60016, 60017, 60020, 60021, 70051, 70398, 10017, 20012)
	return m
}()

// ClassifyCode returns the class of a Tencent ErrorCode and whether a
// later retry of the same request can succeed.
func ClassifyCode(code int) (Class, bool) {
	c, ok := codeClasses[code]
	if !ok {
		if code >= 120001 && code <= 130000 {
			return ClassRejected, false
		}
		// An unknown code is retried: the callers' retry budgets (relay:
		// forever, notice: max_retry_count) bound it, and dead-lettering a
		// message on a code we have never seen would lose it for nothing.
		return ClassUnknown, true
	}
	switch c {
	case ClassTransient, ClassRateLimited, ClassAmbiguous:
		return c, true
	}
	return c, false
}

// sigExpiredCodes are the auth codes a fresh UserSig can cure.
func sigExpiredCode(code int) bool { return code == 70001 || code == 70052 }

// maxReason bounds how much of Tencent's free-text ErrorInfo reaches an
// error string (and from there logs and last_error).
const maxReason = 80

func shortReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && s[cut]&0xC0 == 0x80 { // stay on a UTF-8 boundary
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
