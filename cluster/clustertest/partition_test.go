//go:build !race

package clustertest

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The partition harness itself: a node namespace reaches the root
// namespace's services through the proxy and another namespace across
// the bridge; once cut, it reaches neither and is reached only on its
// client port; healed, everything flows again; and when the test ends no
// namespace, veth or bridge of it is left.
func TestMultiMemberNetnsHarness(t *testing.T) {
	var index int
	t.Run("cut-and-heal", func(t *testing.T) {
		nw := NewNetwork(t)
		index = nw.index
		service, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer service.Close()
		go acceptAll(service)
		proxy := nw.Proxy(service.Addr().String())
		ns0, addr0 := nw.AddNode(0)
		ns1, addr1 := nw.AddNode(1)
		for _, a := range []string{addr0 + ":7000", addr0 + ":7002", addr1 + ":7002"} {
			ns := ns0
			if strings.HasPrefix(a, addr1) {
				ns = ns1
			}
			l, err := listenIn(ns, a)
			if err != nil {
				t.Fatalf("listen in %s: %v", ns, err)
			}
			defer l.Close()
			go acceptAll(l)
		}
		check := func(when string, fromNs, to string, want bool) {
			t.Helper()
			if got := dialFrom(fromNs, to); got != want {
				t.Errorf("%s: %s -> %s reachable = %v, want %v", when, fromNs, to, got, want)
			}
		}
		for _, when := range []string{"before the cut", "after the heal"} {
			if when == "after the heal" {
				if err := heal(ns0); err != nil {
					t.Fatal(err)
				}
			}
			check(when, ns0, proxy, true)         // MariaDB/etcd side
			check(when, ns0, addr1+":7002", true) // the other node
			check(when, ns1, addr0+":7002", true) // the other node, inwards
			check(when, "", addr0+":7000", true)  // a client
			if when == "before the cut" {
				if err := cut(ns0, []string{"7000"}); err != nil {
					t.Fatal(err)
				}
				check("cut", ns0, proxy, false)
				check("cut", ns0, addr1+":7002", false)
				check("cut", ns1, addr0+":7002", false)
				check("cut", "", addr0+":7002", false)
				check("cut", "", addr0+":7000", true) // its client port stays open
			}
		}
	})
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, leftover := range []string{fmt.Sprintf("rcbr%d:", index), fmt.Sprintf("rc%dv", index)} {
		if strings.Contains(string(links), " "+leftover) {
			t.Errorf("link %s left behind:\n%s", leftover, links)
		}
	}
	if strings.Contains(string(nss), fmt.Sprintf("rc%d-", index)) {
		t.Errorf("namespace left behind:\n%s", nss)
	}
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// dialFrom reports whether a TCP connection to addr opens within a second
// from namespace ns ("" is the root namespace).
func dialFrom(ns, addr string) bool {
	if ns == "" {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	host, port, _ := net.SplitHostPort(addr)
	return exec.Command("ip", "netns", "exec", ns, "timeout", "1", "bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port).Run() == nil
}
