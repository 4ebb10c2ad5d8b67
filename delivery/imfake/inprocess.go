package imfake

import "net/http"

// Transport returns an http.RoundTripper that serves requests to this
// fake in the calling goroutine, without the loopback connection
// (loopserve's Transport): the same handler, checks, faults and recording
// as over HTTP. Dev mode points its Tencent client at the fake with it. A
// request for any other host fails.
func (s *Server) Transport() http.RoundTripper { return s.srv.Transport("imfake") }
