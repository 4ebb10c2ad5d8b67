package loopserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is a handler served on a loopback address until Close.
type Server struct {
	http *http.Server
	url  string
	done chan struct{}
}

// Check refuses an address that is not on loopback ("localhost", a
// loopback IP); name prefixes the error.
func Check(name, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: %q is not a loopback address", name, addr)
	}
	return nil
}

// Start listens on addr (checked by Check first; port 0 picks one) and
// serves h until Close. name prefixes errors.
func Start(name, addr string, h http.Handler) (*Server, error) {
	if err := Check(name, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Server{
		http: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		url:  "http://" + ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.url }

// Done is closed once the server has stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

// Handler is the handler served, for calls that bypass the network.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Close stops the server: in-flight requests get 2s to end, then their
// connections are closed.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	<-s.done
	return err
}
