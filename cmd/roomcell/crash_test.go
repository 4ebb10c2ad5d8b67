package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// buildServer compiles this command once per test binary.
var buildServer = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "roomcell-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "roomcell")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// child is a roomcell process under test.
type child struct {
	cmd      *exec.Cmd
	exited   <-chan struct{} // closed when the process has exited
	grpcAddr string
	httpAddr string
	log      *os.File
}

func startChild(t *testing.T, bin, config, grpcAddr, httpAddr string) *child {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "roomcell-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", config, "--grpc-addr", grpcAddr, "--http-addr", httpAddr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, grpcAddr: grpcAddr, httpAddr: httpAddr, log: logf}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.exited = exited
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("roomcell exited before it was ready:\n%s", b)
		default:
		}
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("roomcell did not become ready:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeMySQLNodeConfig writes the config of a node on MariaDB (room,
// wallet and notices in database, the fake IM, warnings only) with the
// YAML of rest after it, and returns its path.
func writeMySQLNodeConfig(t *testing.T, nodeID, dsn, database, rest string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf(`node_id: %s
tencent_im: {allow_fake: true}
log: {level: warn}
store: {kind: mysql}
mysql:
  dsn: %q
  room_database: %q
  wallet_database: %q
  notice_database: %q
  auto_migrate: true
`, nodeID, dsn, database, database, database) + rest
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// The crash test: a roomcell process on MariaDB under concurrent
// commands is killed with SIGKILL. After a restart every acknowledged
// command is in the log exactly once, the room state equals the replay of
// its log, and retrying the commands that were in flight lands each once.
func TestCrashKill9LosesNoAcknowledgedCommand(t *testing.T) {
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	mcfg, database := mysqltest.NewDatabase(t)
	config := writeMySQLNodeConfig(t, "crash", mcfg.DSN, database, `room: {snapshot_every: 10}
outbox_worker: {poll_interval: "200ms", publish_timeout: "1s", lease_ttl: "2s"}
`)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	first := startChild(t, bin, config, grpcAddr, httpAddr)

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := v1.NewRoomServiceClient(conn)
	const rooms, workers = 8, 16
	ctx := context.Background()
	for r := range rooms {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create", AppCode: "crash", RoomId: fmt.Sprint("r", r), UserId: "owner", Name: "n"}); err != nil {
			t.Fatal(err)
		}
	}

	type sent struct {
		room, id string
		join     bool
		user     string
	}
	var mu sync.Mutex
	acked := map[string]sent{}    // command_id -> command, answered OK
	inflight := map[string]sent{} // sent, no answer (the kill)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprint("u", w)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				s := sent{room: fmt.Sprint("r", (w+k/2)%rooms), id: fmt.Sprintf("w%d-%d", w, k), join: k%2 == 0, user: user}
				mu.Lock()
				inflight[s.id] = s
				mu.Unlock()
				err := sendCmd(ctx, rc, s.room, s.id, s.user, s.join)
				if err != nil {
					return // the server died under us: this one stays in flight
				}
				mu.Lock()
				delete(inflight, s.id)
				acked[s.id] = s
				mu.Unlock()
			}
		}()
	}
	// Kill under load: after 2 s, and once at least 150 commands were
	// acknowledged (a saturated machine needs longer for that).
	time.Sleep(2 * time.Second)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 150 {
			break
		}
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("killed with SIGKILL after %d acknowledged commands, %d in flight", len(acked), len(inflight))
	mu.Unlock()
	if len(acked) < 100 {
		t.Fatalf("only %d commands acknowledged before the kill; the test needs load", len(acked))
	}

	startChild(t, bin, config, grpcAddr, httpAddr)
	// Retry what was in flight with the same command_id: each lands once
	// (or answers from the log if it had committed before the kill).
	// The client's channel may still be backing off from the dead node's
	// refused connections: Unavailable is retried, as a client would.
	for id, s := range inflight {
		err := sendCmd(ctx, rc, s.room, id, s.user, s.join)
		for deadline := time.Now().Add(10 * time.Second); status.Code(err) == codes.Unavailable && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			err = sendCmd(ctx, rc, s.room, id, s.user, s.join)
		}
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("retry of in-flight %s: %v", id, err)
		}
	}

	store, err := mysql.Open(ctx, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seen := map[string]int{}
	for r := range rooms {
		key := persistence.RoomKey{AppCode: "crash", RoomID: fmt.Sprint("r", r)}
		recs, err := store.LoadCommands(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := room.NewState(key.AppCode, key.RoomID)
		for i, rec := range recs {
			if rec.Seq != int64(i+1) {
				t.Fatalf("%s: log seq %d at position %d", key, rec.Seq, i)
			}
			seen[rec.CommandID]++
			var evs []room.Event
			for _, e := range rec.Events {
				ev, err := room.DecodeEvent(e.EventType, e.Payload)
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			s = room.ApplyCommand(s, rec.Seq, evs)
		}
		got, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: key.AppCode, RoomId: key.RoomID})
		if err != nil {
			t.Fatal(err)
		}
		replayed := room.View(s)
		if got.Room.Seq != replayed.Seq || fmt.Sprint(got.Room.Members) != fmt.Sprint(replayed.Members) {
			t.Fatalf("%s: live state seq %d members %v; replay of the log: seq %d members %v",
				key, got.Room.Seq, got.Room.Members, replayed.Seq, replayed.Members)
		}
		delete(seen, "create")
	}
	var missing []string
	for id := range acked {
		if seen[id] != 1 {
			missing = append(missing, fmt.Sprintf("%s×%d", id, seen[id]))
		}
	}
	for id := range inflight {
		if seen[id] > 1 {
			missing = append(missing, fmt.Sprintf("%s×%d (in flight)", id, seen[id]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("acknowledged commands not in the log exactly once: %v", missing)
	}
	// Nothing acknowledged is lost from the outbox either: rows the killed
	// relay had leased come back when the lease (2s here) expires, and the
	// new relay publishes everything.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := store.OutboxStats(ctx)
		if err == nil && st.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			rows, _ := store.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxPending, Limit: 3})
			for _, r := range rows {
				t.Logf("pending: %s %s retries=%d last_error=%q", r.Envelope.EventID, r.Envelope.EventType, r.RetryCount, r.LastError)
			}
			t.Fatalf("%d outbox rows still pending 20s after the restart", st.Pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sendCmd(ctx context.Context, rc v1.RoomServiceClient, roomID, id, user string, join bool) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if join {
		_, err = rc.JoinRoom(cctx, &v1.JoinRoomRequest{CommandId: id, AppCode: "crash", RoomId: roomID, UserId: user})
	} else {
		_, err = rc.LeaveRoom(cctx, &v1.LeaveRoomRequest{CommandId: id, AppCode: "crash", RoomId: roomID, UserId: user})
	}
	return err
}
