package mysql

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"
)

// proxy is a TCP relay between a store and the shared MariaDB, which the
// tests cannot stop: cutting the proxy is MySQL going down for the store.
type proxy struct {
	t      testing.TB
	target string
	base   *driverMySQL.Config
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	stalled bool // accept connections but never forward a byte
}

// startProxy relays to the server of dsn and stops with the test.
func startProxy(t testing.TB, dsn string) *proxy {
	t.Helper()
	base, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatal("proxy: DSN does not parse")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: base.Addr, base: base, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

// dsn is the DSN of the server through the proxy.
func (p *proxy) dsn() string {
	c := p.base.Clone()
	c.Addr = p.addr
	return c.FormatDSN()
}

func (p *proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.ln != ln {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.conns[c] = struct{}{}
		stalled := p.stalled
		p.mu.Unlock()
		if stalled {
			continue // held open, silent: a server that hangs
		}
		go p.relay(c)
	}
}

func (p *proxy) relay(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if _, live := p.conns[c]; !live {
		p.mu.Unlock()
		_ = up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes the listener and every connection: connects are refused and
// every pooled connection is dead.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// stall closes every connection and then accepts new ones without
// answering: the server hangs.
func (p *proxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
	p.dropConns()
}

func (p *proxy) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// restore listens again on the same address and relays normally.
func (p *proxy) restore() {
	p.t.Helper()
	p.mu.Lock()
	wasStalled := p.stalled
	p.stalled = false
	p.mu.Unlock()
	if wasStalled {
		p.dropConns() // the silent ones
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	var ln net.Listener
	var err error
	for range 50 { // the port is ours, but the kernel may lag a moment
		if ln, err = net.Listen("tcp", p.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.ln = ln
	go p.serve(ln)
}
