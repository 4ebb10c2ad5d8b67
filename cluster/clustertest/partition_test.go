//go:build !race

package clustertest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The partition harness itself: a node namespace reaches the root
// namespace's services through the proxy and another namespace across
// the bridge; once cut, it reaches neither and is reached only on its
// client port; healed, everything flows again; when the test ends no
// namespace, veth or bridge of it is left; and the network of a test
// process that died before its cleanup is reclaimed.
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
	assertNetworkGone(t, index)

	// What a test process killed before its cleanup leaves behind is
	// reclaimed by the next run; a live process's network is not.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for x := 250; x > 200; x-- {
		if ipCmd("link", "add", fmt.Sprintf("rcbr%d", x), "type", "bridge") != nil {
			continue // in use
		}
		t.Cleanup(func() { removeNetwork(x) })
		if err := ipCmd("link", "set", fmt.Sprintf("rcbr%d", x), "alias", netnsAliasPrefix+fmt.Sprint(dead.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if err := ipCmd("netns", "add", fmt.Sprintf("rc%d-0", x)); err != nil {
			t.Fatal(err)
		}
		if err := ipCmd("link", "add", fmt.Sprintf("rc%dv0", x), "type", "veth", "peer", "name", fmt.Sprintf("rc%dp0", x)); err != nil {
			t.Fatal(err)
		}
		if !reclaimStale(x) {
			t.Fatalf("the network of dead pid %d was not reclaimed", dead.Process.Pid)
		}
		assertNetworkGone(t, x)
		if err := ipCmd("link", "add", fmt.Sprintf("rcbr%d", x), "type", "bridge"); err != nil {
			t.Fatal(err)
		}
		if err := ipCmd("link", "set", fmt.Sprintf("rcbr%d", x), "alias", netnsAliasPrefix+fmt.Sprint(os.Getpid())); err != nil {
			t.Fatal(err)
		}
		if reclaimStale(x) {
			t.Fatal("reclaimed the network of a live process")
		}
		return
	}
	t.Fatal("no free subnet in 201..250 to test reclaiming")
}

// assertNetworkGone fails if subnet x's bridge, veths or namespaces exist.
func assertNetworkGone(t *testing.T, x int) {
	t.Helper()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, leftover := range []string{fmt.Sprintf("rcbr%d:", x), fmt.Sprintf("rc%dv", x)} {
		if strings.Contains(string(links), " "+leftover) {
			t.Errorf("link %s left behind:\n%s", leftover, links)
		}
	}
	if strings.Contains(string(nss), fmt.Sprintf("rc%d-", x)) {
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
