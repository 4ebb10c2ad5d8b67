// Package rocketmqtest starts RocketMQ instances of a test's own (name
// server + broker on free loopback ports, a home in the test's temp
// directory) through deploy/local/rocketmq/rocketmq.sh, so a fault test can
// SIGKILL and restart its broker without touching the machine's shared
// one. It is for tests only and imports no roomcell package but configs and
// delivery/mq/rocketmq.
package rocketmqtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq"
)

// Keys of every instance this package starts.
const (
	AccessKey = "roomcell"
	SecretKey = "roomcell-test-secret"
)

// Instance is one name server + broker.
type Instance struct {
	Home        string
	NameSrvPort int
	BrokerPort  int
	AccessKey   string
	SecretKey   string
}

// Shared is the machine's instance (deploy/local/services.sh), with the
// keys of ROOMCELL_ROCKETMQ_ACCESS_KEY/SECRET_KEY or the script's
// defaults. Never kill it.
func Shared() *Instance {
	in := &Instance{NameSrvPort: 9876, BrokerPort: 10911, AccessKey: "roomcell", SecretKey: "roomcell-local-secret"}
	if v := os.Getenv("ROOMCELL_ROCKETMQ_ACCESS_KEY"); v != "" {
		in.AccessKey = v
	}
	if v := os.Getenv("ROOMCELL_ROCKETMQ_SECRET_KEY"); v != "" {
		in.SecretKey = v
	}
	return in
}

func script(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "deploy", "local", "rocketmq", "rocketmq.sh")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("rocketmq.sh: %v", err)
	}
	return p
}

// freePorts finds a name server port and a broker port whose neighbours
// (port-2 and port+1, the broker's other listeners) are free too.
func freePorts(t testing.TB) (int, int) {
	t.Helper()
	free := func(p int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		_ = l.Close()
		return true
	}
	for base := 21000 + os.Getpid()%2000*10; base < 60000; base += 17 {
		if free(base) && free(base+3) && free(base+5) && free(base+6) {
			return base, base + 5
		}
	}
	t.Fatal("no free ports")
	return 0, 0
}

// Start starts an instance and stops it at the end of the test.
func Start(t testing.TB) *Instance {
	t.Helper()
	ns, br := freePorts(t)
	in := &Instance{Home: t.TempDir(), NameSrvPort: ns, BrokerPort: br, AccessKey: AccessKey, SecretKey: SecretKey}
	t.Cleanup(func() { in.run(t, "stop") })
	in.run(t, "start")
	return in
}

func (in *Instance) run(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(script(t), args...)
	cmd.Env = append(os.Environ(),
		"ROOMCELL_ROCKETMQ_HOME="+in.Home,
		"ROOMCELL_ROCKETMQ_NAMESRV_PORT="+strconv.Itoa(in.NameSrvPort),
		"ROOMCELL_ROCKETMQ_BROKER_PORT="+strconv.Itoa(in.BrokerPort),
		"ROOMCELL_ROCKETMQ_ACCESS_KEY="+AccessKey,
		"ROOMCELL_ROCKETMQ_SECRET_KEY="+SecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rocketmq.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// NameServer is the name server's host:port.
func (in *Instance) NameServer() string { return "127.0.0.1:" + strconv.Itoa(in.NameSrvPort) }

// Broker is the broker's host:port.
func (in *Instance) Broker() string { return "127.0.0.1:" + strconv.Itoa(in.BrokerPort) }

// Config is an enabled RocketMQ MQ config for the instance.
func (in *Instance) Config() configs.MQConfig {
	return configs.MQConfig{Enabled: true, Kind: configs.MQKindRocketMQ, Servers: []string{in.NameServer()},
		AccessKey: in.AccessKey, SecretKey: in.SecretKey}
}

// KillBroker SIGKILLs the broker (by its pid file) and waits until its
// port is closed.
func (in *Instance) KillBroker(t testing.TB) {
	t.Helper()
	if in.Home == "" {
		t.Fatal("never kill the shared broker")
	}
	b, err := os.ReadFile(filepath.Join(in.Home, "broker.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", in.Broker(), 100*time.Millisecond)
		if err != nil {
			return
		}
		_ = c.Close()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the broker still listens after SIGKILL")
}

// StartBroker starts the broker again (the name server kept running).
func (in *Instance) StartBroker(t testing.TB) { in.run(t, "start") }

// Topic creates a fresh topic named prefix + a unique suffix with 8
// queues on the instance's broker, waits until the name server routes it,
// and deletes it at the end of the test.
func (in *Instance) Topic(t testing.TB, prefix string) string {
	t.Helper()
	topic := fmt.Sprint(prefix, time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp, err := rocketmq.NewTopics(ctx, in.Config(), in.Broker())
	if err == nil {
		err = tp.Create(ctx, topic, 8)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Delete(ctx, topic)
		_ = tp.Close()
	})
	return topic
}
