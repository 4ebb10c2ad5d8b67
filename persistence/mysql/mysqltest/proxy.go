package mysqltest

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"
)

// Proxy is a TCP relay between a store and the shared MariaDB, which the
// tests cannot stop: cutting the proxy is MySQL going down for the store,
// and a delay is a slow network or server.
type Proxy struct {
	t      testing.TB
	target string
	base   *driverMySQL.Config
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	stalled bool // accept connections but never forward a byte
	delay   time.Duration
}

// StartProxy relays to the server of dsn and stops with the test.
func StartProxy(t testing.TB, dsn string) *Proxy {
	t.Helper()
	base, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatal("proxy: DSN does not parse")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: base.Addr, base: base, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// DSN is the DSN of the server through the proxy.
func (p *Proxy) DSN() string {
	c := p.base.Clone()
	c.Addr = p.addr
	return c.FormatDSN()
}

func (p *Proxy) serve(ln net.Listener) {
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

func (p *Proxy) relay(c net.Conn) {
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
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := p.Delay(); d > 0 {
					time.Sleep(d)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
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

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.addr }

// SetDelay holds every chunk of bytes, both ways, for d before it is
// forwarded (0 = none): a slow server whose answers can arrive after the
// client gave up.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Delay is the current delay.
func (p *Proxy) Delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Cut closes the listener and every connection: connects are refused and
// every pooled connection is dead.
func (p *Proxy) Cut() {
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

// Stall closes every connection and then accepts new ones without
// answering: the server hangs.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
	p.DropConns()
}

// DropConns closes every connection; new ones are accepted.
func (p *Proxy) DropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore listens again on the same address and relays normally.
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	wasStalled := p.stalled
	p.stalled = false
	p.mu.Unlock()
	if wasStalled {
		p.DropConns() // the silent ones
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
