package clustertest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hyapp/roomcell/configs"
)

// Docker can't run here: these tests check what can be checked without
// it. Every YAML under deploy/ parses, and every configuration a container
// would load goes through the real loader with the environment the
// manifests give it.

const repoRoot = "../.."

// yamlDocs decodes every document of a YAML file into generic maps.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a generic YAML tree: keys for maps, ints for lists.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestEveryDeployYAMLParses(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "deploy"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".yaml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		docs := yamlDocs(t, f)
		if len(docs) == 0 {
			t.Fatalf("%s: no document", f)
		}
		if !strings.Contains(f, "k8s") {
			continue
		}
		for i, d := range docs {
			if get(d, "apiVersion") == nil || get(d, "kind") == nil {
				t.Fatalf("%s doc %d: no apiVersion/kind", f, i)
			}
			if get(d, "kind") != "Kustomization" && get(d, "metadata", "name") == nil {
				t.Fatalf("%s doc %d: no metadata.name", f, i)
			}
		}
	}
}

// shutdownBudget is the longest a node takes from SIGTERM to exit under
// cfg: worker stop, gRPC GracefulStop, cluster drain and leave.
func shutdownBudget(cfg configs.Config) time.Duration {
	return cfg.OutboxWorker.PublishTimeout + 5*time.Second + cfg.GRPC.ShutdownTimeout + cfg.Cluster.DrainTimeout + 5*time.Second
}

var composeRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:([-?])([^}]*))?\}`)

// composeEnv is what compose would do to a value: ${X:-d} from the host
// environment (empty here, so the default), ${X:?msg} is required (compose
// refuses to start without it: here the operator's value is "op-X"), $$
// to $.
func composeEnv(s string) string {
	const dollar = "\x00"
	s = strings.ReplaceAll(s, "$$", dollar)
	s = composeRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := composeRef.FindStringSubmatch(m)
		if sub[3] == "?" {
			return "op-" + sub[1]
		}
		return sub[4]
	})
	return strings.ReplaceAll(s, dollar, "$")
}

func setEnv(t *testing.T, env map[string]any) {
	for k, v := range env {
		t.Setenv(k, composeEnv(v.(string)))
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Fatalf("%q is not host:port", addr)
	}
	return n
}

func TestComposeNodesLoadTheDockerConfig(t *testing.T) {
	docs := yamlDocs(t, filepath.Join(repoRoot, "deploy", "docker-compose.yml"))
	services, _ := get(docs[0], "services").(map[string]any)
	for _, s := range []string{"mysql", "redis", "etcd", "nats", "roomcell-1", "roomcell-2", "roomcell-3", "roomcell-notice"} {
		if services[s] == nil {
			t.Fatalf("compose has no service %s", s)
		}
	}
	for i := 1; i <= 3; i++ {
		name := "roomcell-" + strconv.Itoa(i)
		svc := services[name]
		env, _ := get(svc, "environment").(map[string]any)
		setEnv(t, env)
		vol, _ := get(svc, "volumes", 0).(string)
		src, dst, _ := strings.Cut(vol, ":")
		if !strings.HasPrefix(dst, "/etc/roomcell/config.yaml") || filepath.Clean(src) != "../configs/config.docker.yaml" {
			t.Fatalf("%s mounts %q, want configs/config.docker.yaml", name, vol)
		}
		cfg, err := configs.Load(filepath.Join(repoRoot, "configs", "config.docker.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := cfg.CheckStart(); err != nil {
			t.Fatalf("%s does not start: %v", name, err)
		}
		// No working default secret: compose refuses to start without
		// the operator's tokens and database password.
		for _, v := range []string{"ROOMCELL_CLIENT_TOKENS", "ROOMCELL_OPERATOR_TOKENS", "MYSQL_PASSWORD"} {
			if val, _ := env[v].(string); !strings.HasPrefix(val, "${"+v+":?") {
				t.Fatalf("%s: %s is %q, want ${%s:?...} (required, no default)", name, v, val, v)
			}
		}
		if !slices.Contains(toStrings(get(svc, "volumes")), "./tls:/etc/roomcell/tls:ro") || !cfg.GRPC.TLS.Enabled() ||
			!strings.HasPrefix(cfg.GRPC.TLS.CertFile, "/etc/roomcell/tls/") {
			t.Fatalf("%s: gRPC TLS %+v not served from the mounted deploy/tls", name, cfg.GRPC.TLS)
		}
		if cfg.NodeID != name || cfg.Cluster.Provider != configs.ProviderEtcd || cfg.Store.Kind != configs.StoreMySQL {
			t.Fatalf("%s: node %q provider %q store %q", name, cfg.NodeID, cfg.Cluster.Provider, cfg.Store.Kind)
		}
		host, port, _ := net.SplitHostPort(cfg.Cluster.AdvertisedHost)
		if host != name || port != strconv.Itoa(cfg.Cluster.Port) {
			t.Fatalf("%s advertises %q; want its own service name and cluster.port %d", name, cfg.Cluster.AdvertisedHost, cfg.Cluster.Port)
		}
		for _, ep := range cfg.Cluster.EtcdEndpoints {
			if h, _, _ := net.SplitHostPort(ep); services[h] == nil {
				t.Fatalf("etcd endpoint %s is no compose service", ep)
			}
		}
		if !strings.Contains(cfg.MySQL.DSN, "@tcp(mysql:3306)") || strings.Contains(cfg.MySQL.DSN, "${") {
			t.Fatalf("mysql dsn not pointed at the mysql service or not expanded")
		}
		ports, _ := get(svc, "ports").([]any)
		if len(ports) != 2 || !strings.HasSuffix(ports[0].(string), ":"+strconv.Itoa(portOf(t, cfg.GRPC.Addr))) ||
			!strings.HasSuffix(ports[1].(string), ":"+strconv.Itoa(portOf(t, cfg.HTTP.Addr))) {
			t.Fatalf("%s publishes %v; config listens on %s and %s", name, ports, cfg.GRPC.Addr, cfg.HTTP.Addr)
		}
		grace, err := time.ParseDuration(get(svc, "stop_grace_period").(string))
		if err != nil || grace < shutdownBudget(cfg) {
			t.Fatalf("%s stop_grace_period %v below the shutdown budget %s", name, grace, shutdownBudget(cfg))
		}
		check := strings.Join(toStrings(get(svc, "healthcheck", "test")), " ")
		if !strings.Contains(check, "/readyz") || !strings.Contains(check, strconv.Itoa(portOf(t, cfg.HTTP.Addr))) {
			t.Fatalf("%s healthcheck %q does not probe /readyz on the http port", name, check)
		}
	}

	notice := services["roomcell-notice"]
	setEnv(t, get(notice, "environment").(map[string]any))
	content, _ := get(docs[0], "configs", "notice-config", "content").(string)
	cfg, err := configs.Parse([]byte(composeEnv(content)))
	if err != nil {
		t.Fatalf("notice config: %v", err)
	}
	if err := cfg.CheckStart(); err != nil {
		t.Fatalf("notice node does not start: %v", err)
	}
	if !slices.Equal(cfg.Roles, []string{configs.RoleNotice}) || cfg.NodeID != "roomcell-notice" || !strings.Contains(cfg.MySQL.DSN, "root:op-MYSQL_PASSWORD@tcp(mysql") {
		t.Fatalf("notice config: roles %v node %q", cfg.Roles, cfg.NodeID)
	}
	check := strings.Join(toStrings(get(notice, "healthcheck", "test")), " ")
	if !strings.Contains(check, strconv.Itoa(portOf(t, cfg.HTTP.Addr))) {
		t.Fatalf("notice healthcheck %q misses http port of %s", check, cfg.HTTP.Addr)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// k8sDocs indexes every manifest of deploy/k8s by kind/name.
func k8sDocs(t *testing.T) map[string]map[string]any {
	out := map[string]map[string]any{}
	files, _ := filepath.Glob(filepath.Join(repoRoot, "deploy", "k8s", "*.yaml"))
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			name, _ := get(d, "metadata", "name").(string)
			out[get(d, "kind").(string)+"/"+name] = d
		}
	}
	return out
}

func TestK8sManifestsMatchTheConfig(t *testing.T) {
	docs := k8sDocs(t)
	sts := docs["StatefulSet/roomcell"]
	cm := docs["ConfigMap/roomcell-config"]
	secret := docs["Secret/roomcell-secrets"]
	if sts == nil || cm == nil || secret == nil || docs["Service/roomcell"] == nil || docs["Deployment/roomcell-notice"] == nil {
		t.Fatalf("missing manifests; have %v", keys(docs))
	}
	kust := yamlDocs(t, filepath.Join(repoRoot, "deploy", "k8s", "kustomization.yaml"))[0]
	files, _ := filepath.Glob(filepath.Join(repoRoot, "deploy", "k8s", "*.yaml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(toStrings(kust["resources"]), base) {
			t.Fatalf("kustomization does not list %s", base)
		}
	}
	// The container environment: secrets plus the downward API.
	t.Setenv("ROOMCELL_NODE_ID", "roomcell-0")
	c := get(sts, "spec", "template", "spec", "containers", 0)
	for _, e := range get(c, "env").([]any) {
		if name := get(e, "name").(string); name == "ROOMCELL_ADVERTISED_HOST" {
			t.Setenv(name, strings.ReplaceAll(get(e, "value").(string), "$(POD_IP)", "10.1.2.3"))
		}
	}
	// The Secret ships with no usable value: a node given it as it is
	// refuses to start, naming a key.
	stringData := get(secret, "stringData").(map[string]any)
	for k, v := range stringData {
		if v.(string) != "" {
			t.Fatalf("secret.yaml ships a value for %s", k)
		}
		t.Setenv(k, "")
	}
	for _, file := range []string{"config.yaml", "notice.yaml"} {
		cfg, err := configs.Parse([]byte(get(cm, "data", file).(string)))
		if err == nil {
			err = cfg.CheckStart()
		}
		var ce *configs.Error
		if !errors.As(err, &ce) {
			t.Fatalf("configmap %s started with the shipped, empty secret: %v", file, err)
		}
	}
	// Filled in by the operator, it starts.
	for k := range stringData {
		t.Setenv(k, "op-"+k)
	}
	t.Setenv("TENCENT_IM_SDK_APP_ID", "1400000001")
	cfg, err := configs.Parse([]byte(get(cm, "data", "config.yaml").(string)))
	if err != nil {
		t.Fatalf("configmap config.yaml: %v", err)
	}
	if err := cfg.CheckStart(); err != nil {
		t.Fatalf("configmap config.yaml with the secrets filled in: %v", err)
	}
	if !cfg.TencentIM.Enabled || cfg.TencentIM.AllowFake || !cfg.GRPC.TLS.Enabled() || cfg.AllowInsecure {
		t.Fatalf("k8s node: real IM %v, allow_fake %v, TLS %v, allow_insecure %v", cfg.TencentIM.Enabled, cfg.TencentIM.AllowFake, cfg.GRPC.TLS.Enabled(), cfg.AllowInsecure)
	}
	if cfg.NodeID != "roomcell-0" || cfg.Cluster.AdvertisedHost != "10.1.2.3:"+strconv.Itoa(cfg.Cluster.Port) || cfg.Cluster.Provider != configs.ProviderEtcd {
		t.Fatalf("k8s node config: node %q advertised %q", cfg.NodeID, cfg.Cluster.AdvertisedHost)
	}
	ports := map[string]int{}
	for _, p := range get(c, "ports").([]any) {
		ports[get(p, "name").(string)] = get(p, "containerPort").(int)
	}
	if ports["grpc"] != portOf(t, cfg.GRPC.Addr) || ports["http"] != portOf(t, cfg.HTTP.Addr) || ports["cluster"] != cfg.Cluster.Port {
		t.Fatalf("container ports %v vs config grpc %s http %s cluster %d", ports, cfg.GRPC.Addr, cfg.HTTP.Addr, cfg.Cluster.Port)
	}
	if get(c, "readinessProbe", "httpGet", "path") != "/readyz" || get(c, "readinessProbe", "httpGet", "port") != "http" {
		t.Fatalf("readiness probe %v", get(c, "readinessProbe"))
	}
	preStop := toStrings(get(c, "lifecycle", "preStop", "exec", "command"))
	sleep, err := strconv.Atoi(preStop[len(preStop)-1])
	if err != nil {
		t.Fatalf("preStop %v", preStop)
	}
	grace := time.Duration(get(sts, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)) * time.Second
	if need := time.Duration(sleep)*time.Second + shutdownBudget(cfg); grace < need {
		t.Fatalf("terminationGracePeriodSeconds %s < preStop %ds + shutdown budget %s", grace, sleep, shutdownBudget(cfg))
	}

	// Same cluster, store and timeouts as the compose nodes.
	t.Setenv("ROOMCELL_ADVERTISED_HOST", "roomcell-1:7000")
	docker, err := configs.Load(filepath.Join(repoRoot, "configs", "config.docker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k, d := cfg.Cluster, docker.Cluster
	k.AdvertisedHost, d.AdvertisedHost = "", ""
	k.AutomanagedHosts, d.AutomanagedHosts = nil, nil
	if k.Name != d.Name || k.Provider != d.Provider || k.Port != d.Port || k.EtcdBaseKey != d.EtcdBaseKey ||
		!slices.Equal(k.EtcdEndpoints, d.EtcdEndpoints) || k.RequestTimeout != d.RequestTimeout {
		t.Fatalf("k8s cluster section %+v differs from config.docker.yaml %+v", k, d)
	}
	if !reflect.DeepEqual(cfg.GRPC, docker.GRPC) || cfg.HTTP != docker.HTTP || cfg.Store != docker.Store || !slices.Equal(cfg.Roles, docker.Roles) {
		t.Fatalf("k8s grpc/http/store/roles differ from config.docker.yaml")
	}

	notice := docs["Deployment/roomcell-notice"]
	ncfg, err := configs.Parse([]byte(get(cm, "data", "notice.yaml").(string)))
	if err != nil {
		t.Fatalf("configmap notice.yaml: %v", err)
	}
	if err := ncfg.CheckStart(); err != nil || !ncfg.TencentIM.Enabled {
		t.Fatalf("configmap notice.yaml with the secrets filled in: %v (real IM %v)", err, ncfg.TencentIM.Enabled)
	}
	nc := get(notice, "spec", "template", "spec", "containers", 0)
	if !slices.Equal(ncfg.Roles, []string{configs.RoleNotice}) || get(nc, "ports", 1, "containerPort") != portOf(t, ncfg.HTTP.Addr) {
		t.Fatalf("notice: roles %v, http %s vs container ports %v", ncfg.Roles, ncfg.HTTP.Addr, get(nc, "ports"))
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quantity reads a Kubernetes memory quantity (Mi, Gi) or a GOMEMLIMIT
// value (MiB, GiB) in bytes; 0 for anything else.
func quantity(s string) uint64 {
	for suffix, mult := range map[string]uint64{"GiB": 1 << 30, "MiB": 1 << 20, "Gi": 1 << 30, "Mi": 1 << 20} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseUint(n, 10, 64)
			if err != nil {
				return 0
			}
			return v * mult
		}
	}
	return 0
}

// A container with a memory limit sets GOMEMLIMIT under it: the server's
// GC heap floor (512 MiB) would otherwise let a pod near its limit grow
// to the floor and be killed before it collects.
func TestK8sContainersHoldTheirHeapUnderTheLimit(t *testing.T) {
	checked := 0
	for name, d := range k8sDocs(t) {
		containers, _ := get(d, "spec", "template", "spec", "containers").([]any)
		for _, c := range containers {
			lim, _ := get(c, "resources", "limits", "memory").(string)
			if lim == "" {
				continue
			}
			limit := quantity(lim)
			var goLimit uint64
			env, _ := get(c, "env").([]any)
			for _, e := range env {
				if get(e, "name") == "GOMEMLIMIT" {
					v, _ := get(e, "value").(string)
					goLimit = quantity(v)
				}
			}
			if limit == 0 || goLimit == 0 || goLimit > limit*9/10 {
				t.Errorf("%s: limits.memory %q, GOMEMLIMIT %d bytes: want GOMEMLIMIT set, in MiB or GiB, at most 90%% of the limit", name, lim, goLimit)
			}
			checked++
		}
	}
	if checked < 2 {
		t.Fatalf("checked %d containers with a memory limit, want the node and the notice service", checked)
	}
}

// Every workload is scraped and served: its pod template asks
// Prometheus to scrape the container's http (ops) port at /metrics, and a
// Service selects its pods on that port, so its alerts and panels get
// data.
func TestK8sWorkloadsAreScrapedAndServed(t *testing.T) {
	docs := k8sDocs(t)
	checked := 0
	for name, d := range docs {
		if kind := get(d, "kind"); kind != "Deployment" && kind != "StatefulSet" {
			continue
		}
		checked++
		labels, _ := get(d, "spec", "template", "metadata", "labels").(map[string]any)
		ann, _ := get(d, "spec", "template", "metadata", "annotations").(map[string]any)
		httpPort := 0
		for _, p := range get(d, "spec", "template", "spec", "containers", 0, "ports").([]any) {
			if get(p, "name") == "http" {
				httpPort = get(p, "containerPort").(int)
			}
		}
		if httpPort == 0 {
			t.Errorf("%s: no container port named http", name)
			continue
		}
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(httpPort) || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v, want scrape \"true\", port %d, path /metrics", name, ann, httpPort)
		}
		served := false
		for _, svc := range docs {
			if get(svc, "kind") != "Service" {
				continue
			}
			sel, _ := get(svc, "spec", "selector").(map[string]any)
			match := len(sel) > 0
			for k, v := range sel {
				match = match && labels[k] == v
			}
			if !match {
				continue
			}
			for _, p := range get(svc, "spec", "ports").([]any) {
				if get(p, "targetPort") == "http" {
					served = true
				}
			}
		}
		if !served {
			t.Errorf("%s: no Service selects its pods on the http port", name)
		}
	}
	if checked < 2 {
		t.Fatalf("checked %d workloads, want the room nodes and the notice service", checked)
	}
}

// Every pod passes the Pod Security "restricted" profile
// (kubernetes.io/docs/concepts/security/pod-security-standards), checked
// field by field as the admission controller would: a pod it refuses
// never runs.
func TestK8sPodsPassTheRestrictedProfile(t *testing.T) {
	allowedVolume := map[string]bool{"configMap": true, "secret": true, "emptyDir": true, "projected": true,
		"downwardAPI": true, "persistentVolumeClaim": true, "ephemeral": true, "csi": true}
	pods := 0
	for name, d := range k8sDocs(t) {
		spec, _ := get(d, "spec", "template", "spec").(map[string]any)
		if spec == nil {
			continue
		}
		pods++
		for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
			if v, _ := spec[k].(bool); v {
				t.Errorf("%s: %s", name, k)
			}
		}
		podRunAsNonRoot, _ := get(spec, "securityContext", "runAsNonRoot").(bool)
		podSeccomp, _ := get(spec, "securityContext", "seccompProfile", "type").(string)
		if uid, ok := get(spec, "securityContext", "runAsUser").(int); ok && uid == 0 {
			t.Errorf("%s: pod runAsUser 0", name)
		}
		vols, _ := spec["volumes"].([]any)
		for _, v := range vols {
			for k := range v.(map[string]any) {
				if k != "name" && !allowedVolume[k] {
					t.Errorf("%s: volume %v of type %s", name, get(v, "name"), k)
				}
			}
		}
		var containers []any
		for _, list := range []string{"initContainers", "containers"} {
			l, _ := spec[list].([]any)
			containers = append(containers, l...)
		}
		for _, c := range containers {
			cname := name + "/" + get(c, "name").(string)
			sc, _ := get(c, "securityContext").(map[string]any)
			if ape, ok := sc["allowPrivilegeEscalation"].(bool); !ok || ape {
				t.Errorf("%s: allowPrivilegeEscalation must be false", cname)
			}
			if p, _ := sc["privileged"].(bool); p {
				t.Errorf("%s: privileged", cname)
			}
			if !slices.Contains(toStrings(get(sc, "capabilities", "drop")), "ALL") {
				t.Errorf("%s: capabilities.drop must hold ALL", cname)
			}
			for _, add := range toStrings(get(sc, "capabilities", "add")) {
				if add != "NET_BIND_SERVICE" {
					t.Errorf("%s: adds capability %s", cname, add)
				}
			}
			nonRoot, ok := sc["runAsNonRoot"].(bool)
			if !ok {
				nonRoot = podRunAsNonRoot
			}
			if !nonRoot {
				t.Errorf("%s: runAsNonRoot must be true (pod or container)", cname)
			}
			if uid, ok := sc["runAsUser"].(int); ok && uid == 0 {
				t.Errorf("%s: runAsUser 0", cname)
			}
			seccomp, _ := get(sc, "seccompProfile", "type").(string)
			if seccomp == "" {
				seccomp = podSeccomp
			}
			if seccomp != "RuntimeDefault" && seccomp != "Localhost" {
				t.Errorf("%s: seccompProfile.type %q, want RuntimeDefault", cname, seccomp)
			}
			// Not in the profile, but asked of ours: nothing writes the
			// image.
			if ro, _ := sc["readOnlyRootFilesystem"].(bool); !ro {
				t.Errorf("%s: readOnlyRootFilesystem must be true", cname)
			}
		}
	}
	if pods < 2 {
		t.Fatalf("checked %d pod templates, want the node StatefulSet and the notice Deployment", pods)
	}
}
