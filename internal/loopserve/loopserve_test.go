package loopserve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0", "example.com:0", "no-port"} {
		if s, err := Start("fake", addr, http.NotFoundHandler()); err == nil {
			s.Close()
			t.Errorf("Start(%q) served; want a refusal", addr)
		} else if !strings.HasPrefix(err.Error(), "fake: ") {
			t.Errorf("Start(%q) error %q: want the name as prefix", addr, err)
		}
	}
}

func TestServesUntilClose(t *testing.T) {
	s, err := Start("fake", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "pong")
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q: want http://127.0.0.1:port", s.URL())
	}
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "pong" {
		t.Fatalf("body %q, want pong", b)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if _, err := http.Get(s.URL()); err == nil {
		t.Fatal("a request after Close was answered")
	}
}
