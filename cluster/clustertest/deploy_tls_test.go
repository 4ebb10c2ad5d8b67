package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
)

// What the deploy files promise about etcd and NATS, checked without
// Docker: the servers take TLS clients only and want a client certificate,
// the roomcell configurations they ship load (with the environment the
// manifests give) with TLS on, a client certificate and etcd auth, and no
// default secret works. Then the compose etcd and NATS command lines run
// against local binaries with the certificates deploy/tls/gen-certs.sh
// makes: the node's settings connect; plaintext, a client without a
// certificate and a certificate of another CA are refused.

// composeServices returns the compose file's services.
func composeServices(t *testing.T) map[string]any {
	t.Helper()
	docs := yamlDocs(t, filepath.Join(repoRoot, "deploy", "docker-compose.yml"))
	s, _ := get(docs[0], "services").(map[string]any)
	return s
}

// genCertNames are the files gen-certs.sh makes.
func genCertNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "tls", "gen-certs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"ca.crt"}
	for _, m := range regexp.MustCompile(`(?m)^cert (\S+) `).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1]+".crt", m[1]+".key")
	}
	return names
}

func wantTLSFiles(t *testing.T, what string, c configs.ClientTLSConfig, dir string) {
	t.Helper()
	if !c.Enabled || c.CAFile == "" || c.CertFile == "" || c.KeyFile == "" {
		t.Fatalf("%s: TLS %+v: want enabled with a CA, a client certificate and its key", what, c)
	}
	for _, f := range []string{c.CAFile, c.CertFile, c.KeyFile} {
		if !strings.HasPrefix(f, dir) {
			t.Fatalf("%s: %s is not under the mounted %s", what, f, dir)
		}
	}
}

func TestComposeEtcdAndNATSRequireTLS(t *testing.T) {
	services := composeServices(t)
	made := genCertNames(t)
	// Every certificate file a service mounts is one gen-certs.sh makes.
	for name, svc := range services {
		for _, v := range toStrings(get(svc, "volumes")) {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./tls/") && !slices.Contains(made, strings.TrimPrefix(src, "./tls/")) {
				t.Fatalf("%s mounts %s, which deploy/tls/gen-certs.sh does not make (it makes %v)", name, src, made)
			}
		}
	}
	etcdCmd := strings.Join(toStrings(get(services["etcd"], "command")), " ")
	for _, want := range []string{"--listen-client-urls=https://", "--advertise-client-urls=https://", "--client-cert-auth=true", "--trusted-ca-file=/tls/ca.crt"} {
		if !strings.Contains(etcdCmd, want) {
			t.Fatalf("etcd command %q lacks %s", etcdCmd, want)
		}
	}
	if strings.Contains(etcdCmd, "client-urls=http://") {
		t.Fatalf("etcd serves plaintext clients: %q", etcdCmd)
	}
	natsCmd := strings.Join(toStrings(get(services["nats"], "command")), " ")
	for _, want := range []string{"--tls", "--tlsverify", "--tlscacert=/tls/ca.crt"} {
		if !strings.Contains(natsCmd, want) {
			t.Fatalf("nats command %q lacks %s", natsCmd, want)
		}
	}
	init := services["etcd-init"]
	for _, v := range []string{"ETCD_ROOT_PASSWORD", "ETCD_PASSWORD"} {
		if val, _ := get(init, "environment", v).(string); !strings.HasPrefix(val, "${"+v+":?") {
			t.Fatalf("etcd-init: %s is %q, want ${%s:?...} (required, no default)", v, val, v)
		}
	}
	for i := 1; i <= 3; i++ {
		name := "roomcell-" + strconv.Itoa(i)
		svc := services[name]
		if get(svc, "depends_on", "etcd-init", "condition") != "service_completed_successfully" {
			t.Fatalf("%s does not wait for etcd-init: %v", name, get(svc, "depends_on"))
		}
		env, _ := get(svc, "environment").(map[string]any)
		if val, _ := env["ETCD_PASSWORD"].(string); !strings.HasPrefix(val, "${ETCD_PASSWORD:?") {
			t.Fatalf("%s: ETCD_PASSWORD is %q, want required", name, val)
		}
		setEnv(t, env)
		cfg, err := configs.Load(filepath.Join(repoRoot, "configs", "config.docker.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := cfg.CheckStart(); err != nil {
			t.Fatalf("%s does not start: %v", name, err)
		}
		wantTLSFiles(t, name+" cluster.etcd_tls", cfg.Cluster.EtcdTLS, "/etc/roomcell/tls/")
		if cfg.Cluster.EtcdUsername != "roomcell" || cfg.Cluster.EtcdPassword != "op-ETCD_PASSWORD" {
			t.Fatalf("%s: etcd user %q, password from ETCD_PASSWORD %v", name, cfg.Cluster.EtcdUsername, cfg.Cluster.EtcdPassword == "op-ETCD_PASSWORD")
		}
		for _, ep := range cfg.Cluster.EtcdEndpoints {
			if strings.HasPrefix(ep, "http://") {
				t.Fatalf("%s: plaintext etcd endpoint %s", name, ep)
			}
		}
	}
	notice := services["roomcell-notice"]
	setEnv(t, get(notice, "environment").(map[string]any))
	docs := yamlDocs(t, filepath.Join(repoRoot, "deploy", "docker-compose.yml"))
	content, _ := get(docs[0], "configs", "notice-config", "content").(string)
	ncfg, err := configs.Parse([]byte(composeEnv(content)))
	if err != nil {
		t.Fatal(err)
	}
	if !ncfg.Notice.MQ.Enabled || ncfg.Notice.MQ.Kind != "nats" {
		t.Fatalf("notice node MQ %+v", ncfg.Notice.MQ)
	}
	wantTLSFiles(t, "notice notice.mq.tls", ncfg.Notice.MQ.TLS, "/etc/roomcell/tls/")
}

// mountOf is the mount path of the volume backed by Secret secret in a
// pod template.
func mountOf(t *testing.T, d map[string]any, secret string) string {
	t.Helper()
	spec := get(d, "spec", "template", "spec")
	vol := ""
	for _, v := range get(spec, "volumes").([]any) {
		if get(v, "secret", "secretName") == secret {
			vol = get(v, "name").(string)
		}
	}
	for _, m := range get(spec, "containers", 0, "volumeMounts").([]any) {
		if vol != "" && get(m, "name") == vol {
			return get(m, "mountPath").(string) + "/"
		}
	}
	t.Fatalf("no volume of Secret %s mounted", secret)
	return ""
}

func TestK8sEtcdAndNATSOverTLS(t *testing.T) {
	docs := k8sDocs(t)
	cm, secret := docs["ConfigMap/roomcell-config"], docs["Secret/roomcell-secrets"]
	stringData := get(secret, "stringData").(map[string]any)
	if v, ok := stringData["ETCD_PASSWORD"]; !ok || v != "" {
		t.Fatalf("secret.yaml: ETCD_PASSWORD %v, want listed and empty", v)
	}
	for k := range stringData {
		t.Setenv(k, "op-"+k)
	}
	t.Setenv("TENCENT_IM_SDK_APP_ID", "1400000001")
	t.Setenv("ROOMCELL_NODE_ID", "roomcell-0")
	t.Setenv("ROOMCELL_ADVERTISED_HOST", "10.1.2.3:7000")
	cfg, err := configs.Parse([]byte(get(cm, "data", "config.yaml").(string)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckStart(); err != nil {
		t.Fatal(err)
	}
	wantTLSFiles(t, "k8s cluster.etcd_tls", cfg.Cluster.EtcdTLS, mountOf(t, docs["StatefulSet/roomcell"], "roomcell-etcd-client"))
	if cfg.Cluster.EtcdUsername != "roomcell" || cfg.Cluster.EtcdPassword != "op-ETCD_PASSWORD" {
		t.Fatalf("k8s etcd auth: user %q", cfg.Cluster.EtcdUsername)
	}
	ncfg, err := configs.Parse([]byte(get(cm, "data", "notice.yaml").(string)))
	if err != nil {
		t.Fatal(err)
	}
	wantTLSFiles(t, "k8s notice.mq.tls", ncfg.Notice.MQ.TLS, mountOf(t, docs["Deployment/roomcell-notice"], "roomcell-nats-client"))
	// Without the etcd password the node refuses to start.
	t.Setenv("ETCD_PASSWORD", "")
	if cfg, err := configs.Parse([]byte(get(cm, "data", "config.yaml").(string))); err == nil && cfg.CheckStart() == nil {
		t.Fatal("k8s node starts with an empty ETCD_PASSWORD")
	}
}

// genCerts runs deploy/tls/gen-certs.sh into a temp dir.
func genCerts(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl not installed (the machine's base image has it)")
	}
	dir := t.TempDir()
	out, err := exec.Command("sh", filepath.Join(repoRoot, "deploy", "tls", "gen-certs.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen-certs.sh: %v\n%s", err, out)
	}
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// localArgs turns a compose command into one for a local binary: the
// mounted /tls files come from dir, listen addresses move to free
// loopback ports.
func localArgs(cmd []string, dir string, ports map[string]int) []string {
	var out []string
	for _, a := range cmd {
		a = strings.ReplaceAll(a, "/tls/", dir+"/")
		for from, to := range ports {
			a = strings.ReplaceAll(a, from, "127.0.0.1:"+strconv.Itoa(to))
		}
		out = append(out, a)
	}
	return out
}

func startLocal(t *testing.T, bin string, args []string) {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not installed (deploy/local/services.sh installs it)", bin)
	}
	cmd := exec.Command(path, args...)
	logf, _ := os.Create(filepath.Join(t.TempDir(), bin+".log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func nodeTLS(t *testing.T, c configs.ClientTLSConfig, from, dir string) *tls.Config {
	t.Helper()
	c.CAFile = strings.Replace(c.CAFile, from, dir+"/", 1)
	c.CertFile = strings.Replace(c.CertFile, from, dir+"/", 1)
	c.KeyFile = strings.Replace(c.KeyFile, from, dir+"/", 1)
	tc, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// otherCA is a client certificate of a CA the servers do not trust.
func otherCA(t *testing.T) *tls.Config {
	ca := certtest.NewCA(t, "other")
	certFile, keyFile := ca.Client(t, "roomcell")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true} //nolint:gosec // the server's refusal is what is tested
}

func TestComposeEtcdCommandServesTheNodesSettings(t *testing.T) {
	dir := genCerts(t)
	services := composeServices(t)
	cmd := toStrings(get(services["etcd"], "command"))
	client, peer := freePort(t), freePort(t)
	args := localArgs(cmd[1:], dir, map[string]int{"0.0.0.0:2379": client, "etcd:2379": client, "0.0.0.0:2380": peer, "etcd:2380": peer})
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--data-dir="):
			args[i] = "--data-dir=" + filepath.Join(t.TempDir(), "data")
		case strings.HasPrefix(a, "--initial-cluster="):
			// One member of compose's three: its client side is what the
			// nodes' settings meet.
			args[i] = "--initial-cluster=etcd=http://127.0.0.1:" + strconv.Itoa(peer)
		}
	}
	startLocal(t, "etcd", args)
	setEnv(t, get(services["roomcell-1"], "environment").(map[string]any))
	cfg, err := configs.Load(filepath.Join(repoRoot, "configs", "config.docker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ep := "127.0.0.1:" + strconv.Itoa(client)
	try := func(tc *tls.Config, scheme string) error {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{scheme + ep}, TLS: tc, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = c.Put(ctx, "/roomcell/deploy-test", "x")
		return err
	}
	var up error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if up = try(nodeTLS(t, cfg.Cluster.EtcdTLS, "/etc/roomcell/tls/", dir), "https://"); up == nil {
			break
		}
	}
	if up != nil {
		t.Fatalf("the node's etcd_tls against compose's etcd command: %v", up)
	}
	if err := try(nil, "http://"); err == nil {
		t.Fatal("compose's etcd answered a plaintext client")
	}
	noCert := nodeTLS(t, cfg.Cluster.EtcdTLS, "/etc/roomcell/tls/", dir)
	noCert.Certificates = nil
	if err := try(noCert, "https://"); err == nil {
		t.Fatal("compose's etcd answered a client without a certificate")
	}
	if err := try(otherCA(t), "https://"); err == nil {
		t.Fatal("compose's etcd answered a certificate of another CA")
	}
}

func TestComposeNATSCommandServesTheNoticeSettings(t *testing.T) {
	dir := genCerts(t)
	services := composeServices(t)
	port := freePort(t)
	args := localArgs(toStrings(get(services["nats"], "command")), dir, nil)
	for i, a := range args {
		if a == "/data" {
			args[i] = t.TempDir()
		}
	}
	startLocal(t, "nats-server", append(args, "-a", "127.0.0.1", "-p", strconv.Itoa(port)))
	setEnv(t, get(services["roomcell-notice"], "environment").(map[string]any))
	docs := yamlDocs(t, filepath.Join(repoRoot, "deploy", "docker-compose.yml"))
	content, _ := get(docs[0], "configs", "notice-config", "content").(string)
	ncfg, err := configs.Parse([]byte(composeEnv(content)))
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	try := func(opts ...nats.Option) error {
		nc, err := nats.Connect(url, append(opts, nats.Timeout(2*time.Second), nats.NoReconnect())...)
		if err != nil {
			return err
		}
		defer nc.Close()
		return nc.Flush()
	}
	good := nodeTLS(t, ncfg.Notice.MQ.TLS, "/etc/roomcell/tls/", dir)
	good.ServerName = "localhost"
	var up error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if up = try(nats.Secure(good)); up == nil {
			break
		}
	}
	if up != nil {
		t.Fatalf("the notice node's mq.tls against compose's NATS command: %v", up)
	}
	if err := try(); err == nil {
		t.Fatal("compose's NATS accepted a plaintext client")
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	if err := try(nats.Secure(noCert)); err == nil {
		t.Fatal("compose's NATS accepted a client without a certificate")
	}
	if err := try(nats.Secure(otherCA(t))); err == nil {
		t.Fatal("compose's NATS accepted a certificate of another CA")
	}
}
