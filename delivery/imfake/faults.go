package imfake

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// faults is the injected misbehaviour; guarded by Server.mu.
type faults struct {
	failNext     int
	failNextCode int
	failNextAPIs map[string]bool

	failFrac     float64
	failFracCode int
	failFracAPIs map[string]bool

	delay      time.Duration
	delayFrac  float64
	delayFracD time.Duration

	httpStatus int
	// outageUntil: every call fails at the gateway (503) until then.
	outageUntil time.Time
	dropNext    int
	groupRate   int
}

func apiSet(apis []string) map[string]bool {
	if len(apis) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, a := range apis {
		m[a] = true
	}
	return m
}

// matches: an empty set means every API.
func matches(set map[string]bool, api string) bool { return set == nil || set[api] }

// preflight decides the delay and HTTP status of one request.
func (f *faults) preflight(mu *sync.Mutex) (time.Duration, int) {
	mu.Lock()
	defer mu.Unlock()
	d := f.delay
	if f.delayFrac > 0 && rand.Float64() < f.delayFrac && f.delayFracD > d {
		d = f.delayFracD
	}
	if f.httpStatus == 0 && time.Now().Before(f.outageUntil) {
		return d, http.StatusServiceUnavailable
	}
	return d, f.httpStatus
}

// injected returns the error code to answer with, if a fault applies.
func (f *faults) injected(mu *sync.Mutex, api string) (int, bool) {
	mu.Lock()
	defer mu.Unlock()
	if f.failNext > 0 && matches(f.failNextAPIs, api) {
		f.failNext--
		return f.failNextCode, true
	}
	if f.failFrac > 0 && matches(f.failFracAPIs, api) && rand.Float64() < f.failFrac {
		return f.failFracCode, true
	}
	return 0, false
}

// FailNext answers the next n calls (of the given APIs; none = any API)
// with ErrorCode code, after authentication passed.
func (s *Server) FailNext(n, code int, apis ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failNext, s.faults.failNextCode, s.faults.failNextAPIs = n, code, apiSet(apis)
}

// FailFraction answers a fraction p of calls (of the given APIs; none =
// any) with ErrorCode code.
func (s *Server) FailFraction(p float64, code int, apis ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failFrac, s.faults.failFracCode, s.faults.failFracAPIs = p, code, apiSet(apis)
}

// Delay holds every response for d. The request is applied first, as a
// slow Tencent would: a client that gives up has still sent the message.
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.delay = d
}

// DelayFraction holds a fraction p of responses for d.
func (s *Server) DelayFraction(p float64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.delayFrac, s.faults.delayFracD = p, d
}

// SetHTTPStatus makes every call fail at the "gateway" with status (e.g.
// 502) without reaching the API; 0 turns it off.
func (s *Server) SetHTTPStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.httpStatus = status
}

// FailFor makes every call fail at the "gateway" with 503 for d from now,
// as a Tencent outage would: the senders retry, rows wait pending, and the
// relay delivers them once it ends. d <= 0 ends an outage early. It
// returns when the outage ends.
func (s *Server) FailFor(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.outageUntil = time.Now().Add(d)
	return s.faults.outageUntil
}

// DropNext accepts the next n group messages with ErrorCode 0 but a
// non-empty MsgDropReason, as Tencent's frequency control does, and does
// not record them.
func (s *Server) DropNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.dropNext = n
}

// SetGroupRateLimit makes send_group_msg answer 10023 when a group already
// accepted perSecond messages in the last second; 0 turns it off.
func (s *Server) SetGroupRateLimit(perSecond int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.groupRate = perSecond
}

// ResetFaults removes every injected fault.
func (s *Server) ResetFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults{}
}
