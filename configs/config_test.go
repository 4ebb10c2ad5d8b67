package configs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The shipped files load through the real loader.
// shippedEnv sets every variable the shipped files refer to.
func shippedEnv(t *testing.T) {
	for k, v := range map[string]string{
		"TENCENT_IM_SECRET_KEY": "test-secret", "MYSQL_PASSWORD": "pw", "ROOMCELL_NODE_ID": "node-7",
		"ROOMCELL_CLIENT_TOKENS": "c1,c2", "ROOMCELL_OPERATOR_TOKENS": "o1", "ROOMCELL_ADVERTISED_HOST": "node-7:7000",
		"ROOMCELL_TLS_CERT": "/tls/crt", "ROOMCELL_TLS_KEY": "/tls/key", "REDIS_PASSWORD": "rpw", "ETCD_PASSWORD": "epw",
		"TENCENT_IM_CALLBACK_TOKEN": "im-token", "TRTC_CALLBACK_KEY": "cbKey1",
	} {
		t.Setenv(k, v)
	}
}

func TestShippedFilesLoad(t *testing.T) {
	shippedEnv(t)
	for _, f := range []string{"config.yaml", "config.docker.yaml", "config.tencent.example.yaml"} {
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.CheckStart(); err != nil {
			t.Fatalf("%s does not start: %v", f, err)
		}
		if c.AllowInsecure {
			t.Fatalf("%s ships allow_insecure: true", f)
		}
		if c.OutboxWorker.RetryStrategy != RetryFixedInterval || c.OutboxWorker.BatchSize != 100 ||
			c.OutboxWorker.PollInterval != time.Second || c.OutboxWorker.PublishTimeout != 3*time.Second || !c.OutboxWorker.On() {
			t.Fatalf("%s: outbox_worker %+v differs from seed 000 defaults", f, c.OutboxWorker)
		}
		if len(c.Gifts) != 3 {
			t.Fatalf("%s: gifts %v", f, c.Gifts)
		}
		if !reflect.DeepEqual(c.Wallet.VipPlans, DefaultVipPlans()) {
			t.Fatalf("%s: vip_plans %+v differ from the built-in defaults", f, c.Wallet.VipPlans)
		}
	}
	// The files that listen beyond loopback refuse to start with their
	// token variables empty.
	for _, f := range []string{"config.docker.yaml", "config.tencent.example.yaml"} {
		t.Setenv("ROOMCELL_CLIENT_TOKENS", "")
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var ce *Error
		if err := c.CheckStart(); !errors.As(err, &ce) || ce.Key != "grpc.auth.client_tokens" {
			t.Fatalf("%s with no client tokens: %v", f, err)
		}
	}
	shippedEnv(t)
	c, _ := Load("config.tencent.example.yaml")
	if !c.TencentIM.Enabled || c.TencentIM.SecretKey != "test-secret" || c.NodeID != "node-7" {
		t.Fatalf("env expansion: %+v node %q", c.TencentIM, c.NodeID)
	}
	if c, _ := Load("config.yaml"); c.Store.Kind != StoreMySQL || c.MySQL.DSN != "root:pw@tcp(127.0.0.1:3306)/" {
		t.Fatalf("config.yaml store %q dsn %q", c.Store.Kind, c.MySQL.DSN)
	}
}

func TestDefaultIsDev(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Store.Kind != StoreMemdb || c.Cluster.Provider != ProviderSingle || c.TencentIM.Enabled {
		t.Fatalf("default is not the embedded dev setup: %+v", c)
	}
	if c.Room.SnapshotEvery != 100 || c.Room.IdleTimeout != 10*time.Minute {
		t.Fatalf("room defaults %+v", c.Room)
	}
}

func TestNonPositiveValuesFallBackToDefaults(t *testing.T) {
	c, err := Parse([]byte("outbox_worker:\n  poll_interval: \"-1s\"\n  batch_size: 0\n  publish_timeout: \"0s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := c.OutboxWorker
	if w.PollInterval != time.Second || w.BatchSize != 100 || w.PublishTimeout != 3*time.Second {
		t.Fatalf("fallbacks not applied: %+v", w)
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	cases := []struct{ yaml, key string }{
		{"outbox_worker:\n  retry_strategy: \"forever\"\n", "outbox_worker.retry_strategy"},
		{"store:\n  kind: \"sqlite\"\n", "store.kind"},
		{"store:\n  kind: mysql\n", "mysql.dsn"},
		{"log:\n  level: \"loud\"\n", "log.level"},
		{"grpc:\n  addr: \"nonsense\"\n", "grpc.addr"},
		{"cluster:\n  provider: \"zk\"\n", "cluster.provider"},
		{"cluster:\n  provider: automanaged\n", "cluster.automanaged_hosts"},
		{"roles: [\"room\", \"chef\"]\n", "roles[1]"},
		{"gifts:\n  - {id: rose, price: -1}\n", "gifts[0].price"},
		{"gifts:\n  - {id: rose}\n  - {id: rose}\n", "gifts[1].id"},
		{"tencent_im:\n  enabled: true\n  sdk_app_id: 1\n", "tencent_im.secret_key"},
		{"tencent_im:\n  batch_format: full\n", "tencent_im.batch_format"},
		{"presence:\n  stale_after: \"1s\"\n  scan_interval: \"5s\"\n", "presence.stale_after"},
		{"presence:\n  source: redis\n", "presence.source"},
		{"tencent_im:\n  ban_reconcile_interval: 10s\n", "tencent_im.ban_reconcile_interval"},
		{"tencent_im:\n  ban_reconcile_interval: -1m\n", "tencent_im.ban_reconcile_interval"},
		{"presence:\n  source: im\n  app_codes: [demo]\n", "presence.source"},
		{"presence:\n  source: trtc\n", "presence.source"},
		{"tencent_im:\n  callback: {enabled: true, token: t}\npresence:\n  source: im\n", "presence.app_codes"},
		{"tencent_im:\n  callback: {enabled: true, token: t}\npresence:\n  source: im\n  app_codes: [demo, \"\"]\n", "presence.app_codes[1]"},
		{"trtc:\n  callback: {enabled: true, key: k1}\npresence:\n  source: trtc\n  stale_after: 1000h\n", "presence.stale_after"},
		{"mysql:\n  max_open_conns: 2\n  max_idle_conns: 5\n", "mysql.max_idle_conns"},
		{"wallet:\n  vip_plans:\n    - {level: 1, name: a, days: 30}\n    - {level: 1, name: b, days: 30}\n", "wallet.vip_plans[1].level"},
		{"wallet:\n  vip_plans:\n    - {level: 2, name: a, days: 0}\n", "wallet.vip_plans[0].days"},
		{"grpc:\n  auth:\n    client_tokens: [\"a\\tb\"]\n", "grpc.auth.client_tokens[0]"},
		{"grpc:\n  tls:\n    cert_file: a.crt\n", "grpc.tls"},
		{"grpc:\n  tls:\n    client_ca_file: ca.crt\n", "grpc.tls.client_ca_file"},
		{"mysql:\n  tls:\n    ca_file: ca.crt\n", "mysql.tls.enabled"},
		{"redis:\n  tls:\n    enabled: true\n    key_file: k\n", "redis.tls"},
		{"wallet:\n  tls:\n    server_name: w\n", "wallet.tls.enabled"},
		{"runtime:\n  gc_heap_floor_mb: -1\n", "runtime.gc_heap_floor_mb"},
		{"directory:\n  room_ttl: 30s\n", "directory.room_ttl"},
		{"presence:\n  refresh_interval: 1m\ndirectory:\n  room_ttl: 60s\n", "directory.room_ttl"},
		{"directory:\n  presence_ttl: 59s\n", "directory.presence_ttl"},
		{"runtime:\n  gc_heap_floor_mb: 268435456\n", "runtime.gc_heap_floor_mb"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%q: got %v, want a config error naming %s", tc.yaml, err, tc.key)
		}
	}
}

func TestGCHeapFloor(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want uint64
	}{
		{"", DefaultGCHeapFloorMB << 20},
		{"runtime: {}\n", DefaultGCHeapFloorMB << 20},
		{"runtime:\n  gc_heap_floor_mb: 0\n", 0}, // off, not the default
		{"runtime:\n  gc_heap_floor_mb: 64\n", 64 << 20},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Runtime.GCHeapFloorBytes(); got != tc.want {
			t.Errorf("%q: floor %d bytes, want %d", tc.yaml, got, tc.want)
		}
	}
	if got := Default().Runtime.GCHeapFloorBytes(); got != DefaultGCHeapFloorMB<<20 {
		t.Errorf("dev default floor %d bytes, want %d", got, DefaultGCHeapFloorMB<<20)
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	_, err := Parse([]byte("outbox_worker:\n  poll_intervall: \"1s\"\n"))
	if err == nil || !strings.Contains(err.Error(), "poll_intervall") {
		t.Fatalf("misspelt key: %v, want an error naming it", err)
	}
}

func TestSecretsNotInErrors(t *testing.T) {
	t.Setenv("SECRET_X", "hunter2")
	_, err := Parse([]byte("tencent_im:\n  enabled: true\n  secret_key: \"${SECRET_X}\"\n  sdk_app_id: -1\n"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v must exist and not carry the secret", err)
	}
}

// Tracing's keys fail closed naming the key: a ratio outside 0..1 or an
// endpoint that is not an http(s) URL stops the start; the defaults (off,
// ratio 1) pass.
func TestTracingConfigValidation(t *testing.T) {
	var ce *Error
	for _, tc := range []struct {
		yaml, key string
	}{
		{"tracing: {sample_ratio: 1.5}", "tracing.sample_ratio"},
		{"tracing: {sample_ratio: -0.1}", "tracing.sample_ratio"},
		{"tracing: {otlp_endpoint: \"collector:4317\"}", "tracing.otlp_endpoint"},
		{"tracing: {otlp_endpoint: \"ftp://collector:4317\"}", "tracing.otlp_endpoint"},
		{"tracing: {otlp_endpoint: \"http://\"}", "tracing.otlp_endpoint"},
	} {
		_, err := Build(Layers{File: []byte(tc.yaml)})
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%s: got %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
	c, err := Build(Layers{File: []byte("tracing: {otlp_endpoint: \"https://collector:4317\", sample_ratio: 0}")})
	if err != nil || c.Tracing.Ratio() != 0 || c.Tracing.OTLPEndpoint != "https://collector:4317" {
		t.Fatalf("valid tracing block: %+v %v", c.Tracing, err)
	}
	if d := Default().Tracing; d.OTLPEndpoint != "" || d.Ratio() != 1 {
		t.Fatalf("defaults: %+v", d)
	}
	env := map[string]string{"ROOMCELL_TRACING_SAMPLE_RATIO": "2"}
	_, err = Build(Layers{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err == nil || !errors.As(err, &ce) || ce.Key != "tracing.sample_ratio" {
		t.Fatalf("env ratio 2: %v", err)
	}
}

// The presence sources load with their callbacks on; heartbeat, the
// default, keeps the stale worker, the callback sources stop it.
func TestPresenceSources(t *testing.T) {
	for yaml, want := range map[string]struct {
		source string
		worker bool
	}{
		"node_id: n1\n": {PresenceHeartbeat, true},
		"tencent_im:\n  callback: {enabled: true, token: t}\npresence:\n  source: im\n  app_codes: [demo]\n": {PresenceIM, false},
		"trtc:\n  callback: {enabled: true, key: k1}\npresence:\n  source: trtc\n":                           {PresenceTRTC, false},
	} {
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if c.Presence.Source != want.source || c.Presence.On() != want.worker {
			t.Errorf("%q: source %q worker %v, want %+v", yaml, c.Presence.Source, c.Presence.On(), want)
		}
	}
}

// The directory's TTLs follow the presence block unless set: a file that
// lengthens presence.stale_after or presence.refresh_interval lengthens
// them too; a value set is kept.
func TestDirectoryTTLsFollowPresence(t *testing.T) {
	c, err := Parse([]byte("presence:\n  stale_after: 24h\n  refresh_interval: 1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Directory; d.PresenceTTL != 24*time.Hour || d.RoomTTL != 3*time.Minute || d.Timeout != 2*time.Second ||
		d.MaxBacklog != 1000 || d.ListingGap != 250*time.Millisecond {
		t.Fatalf("directory defaults %+v", d)
	}
	c, err = Parse([]byte("directory:\n  presence_ttl: 10m\n  room_ttl: 2m\n  listing_gap: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Directory; d.PresenceTTL != 10*time.Minute || d.RoomTTL != 2*time.Minute || d.ListingGap != time.Second {
		t.Fatalf("directory values set in the file: %+v", d)
	}
}
