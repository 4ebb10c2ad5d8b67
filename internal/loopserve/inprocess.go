package loopserve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ErrClosed: an in-process call after Close, as a refused connection
// would be over loopback.
var ErrClosed = errors.New("server closed")

// Transport returns an http.RoundTripper that serves requests to this
// server in the calling goroutine, without the loopback connection: the
// same handler, checks, faults and recording as over HTTP, minus the
// socket, the HTTP/1.1 framing and the connection pool. Dev mode points
// its Tencent IM and TRTC clients at their fakes with it, so a fake costs
// the node no server round trip per call. A request for any other host
// fails; name prefixes the errors.
func (s *Server) Transport(name string) http.RoundTripper {
	u, _ := url.Parse(s.URL())
	return &inProcess{s: s, name: name, host: u.Host}
}

type inProcess struct {
	s    *Server
	name string
	host string
}

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		// The RoundTripper contract: the body is closed, even on errors.
		defer req.Body.Close()
	}
	if req.URL.Host != t.host {
		return nil, fmt.Errorf("%s: in-process transport serves %s only, not %s", t.name, t.host, req.URL.Host)
	}
	select {
	case <-t.s.Done():
		return nil, fmt.Errorf("%s: %w", t.name, ErrClosed)
	default:
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The handler sees a server-side request: its own copy (the mux
	// records the matched pattern on it), a body even when empty.
	sreq := req.WithContext(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "in-process"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	w := &recorder{header: http.Header{}}
	t.s.http.Handler.ServeHTTP(w, sreq)
	if err := ctx.Err(); err != nil {
		// A delayed answer past the caller's deadline is lost, as the
		// connection would have been dropped.
		return nil, err
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// recorder is the handler's side of an in-process call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
