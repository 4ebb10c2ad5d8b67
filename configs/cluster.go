package configs

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Cluster providers.
const (
	ProviderSingle      = "single"
	ProviderAutomanaged = "automanaged"
	ProviderEtcd        = "etcd"
)

// ClusterConfig places room grains.
type ClusterConfig struct {
	Name     string `yaml:"name"`
	Provider string `yaml:"provider"` // single | automanaged | etcd
	// Host/Port the remote listens on (Port 0 = random); AdvertisedHost is
	// what other members dial ("host:port"), empty = Host:Port.
	Host           string `yaml:"host"`
	Port           int    `yaml:"port"`
	AdvertisedHost string `yaml:"advertised_host"`
	// RequestTimeout bounds one attempt of a grain request.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// Automanaged: this member's health port (served on Host) and every
	// member's "host:port" health address, this member's included.
	AutomanagedPort  int      `yaml:"automanaged_port"`
	AutomanagedHosts []string `yaml:"automanaged_hosts"`
	// RefreshInterval is how often an automanaged member polls the
	// others; a member missing three polls in a row is dropped.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// Etcd endpoints and base key. EtcdLeaseTTL is how long a member that
	// stopped answering (killed, partitioned) stays listed; it bounds the
	// time until its rooms move.
	EtcdEndpoints []string      `yaml:"etcd_endpoints"`
	EtcdBaseKey   string        `yaml:"etcd_base_key"`
	EtcdLeaseTTL  time.Duration `yaml:"etcd_lease_ttl"`
	// EtcdTLS is TLS to etcd (membership and shard leases): once enabled
	// every endpoint is dialled over TLS (an http:// endpoint is a config
	// error), the server checked against ca_file, cert_file/key_file
	// given when etcd wants client certificates (--client-cert-auth).
	EtcdTLS ClientTLSConfig `yaml:"etcd_tls"`
	// EtcdUsername and EtcdPassword authenticate to etcd when its auth is
	// enabled. Use ${ENV} for the password; never logged.
	EtcdUsername string `yaml:"etcd_username"`
	EtcdPassword string `yaml:"etcd_password"`
	// DrainTimeout bounds a graceful leave: deregister, wait for the
	// other members to stop routing here and for local rooms to
	// snapshot and stop. Kubernetes' terminationGracePeriodSeconds must
	// exceed grpc.shutdown_timeout + drain_timeout + a few seconds.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// TLS between members (mTLS); off while cert_file is empty.
	TLS ClusterTLSConfig `yaml:"tls"`
	// ActorMetrics exports Proto.Actor's own metrics (protoactor_*:
	// spawns, mailbox length, message and future timings) on /metrics.
	// Off by default: they are recorded on every message and future,
	// ~6% of a command's CPU and ~11% of its allocations, and
	// no dashboard of ours reads them; turn on to debug the actor system.
	ActorMetrics bool `yaml:"actor_metrics"`
	// Room ownership (docs/cluster.md): rooms hash into Shards virtual
	// shards; with the etcd provider each shard is leased to one node.
	// ShardLeaseTTL is how long a dead or cut-off node keeps its shards
	// (its rooms answer elsewhere right after); ShardLeaseMargin is how
	// much earlier that node itself stops answering (clock-rate drift
	// and keepalive latency). Changing Shards moves every room.
	Shards           int           `yaml:"shards"`
	ShardLeaseTTL    time.Duration `yaml:"shard_lease_ttl"`
	ShardLeaseMargin time.Duration `yaml:"shard_lease_margin"`
}

func (c *ClusterConfig) setDefaults() {
	if c.Name == "" {
		c.Name = "roomcell"
	}
	if c.Provider == "" {
		c.Provider = ProviderSingle
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	c.RequestTimeout = durationOr(c.RequestTimeout, 3*time.Second)
	c.RefreshInterval = durationOr(c.RefreshInterval, time.Second)
	if c.AutomanagedPort == 0 {
		c.AutomanagedPort = 6330
	}
	if len(c.EtcdEndpoints) == 0 {
		c.EtcdEndpoints = []string{"127.0.0.1:2379"}
	}
	if c.EtcdBaseKey == "" {
		c.EtcdBaseKey = "/roomcell"
	}
	c.EtcdLeaseTTL = durationOr(c.EtcdLeaseTTL, 3*time.Second)
	c.DrainTimeout = durationOr(c.DrainTimeout, 10*time.Second)
	if c.Shards == 0 {
		c.Shards = 1024
	}
	c.ShardLeaseTTL = durationOr(c.ShardLeaseTTL, 2*time.Second)
	c.ShardLeaseMargin = durationOr(c.ShardLeaseMargin, 500*time.Millisecond)
}

func (c ClusterConfig) validate() error {
	switch c.Provider {
	case ProviderSingle, ProviderEtcd:
	case ProviderAutomanaged:
		if len(c.AutomanagedHosts) == 0 {
			return errorf("cluster.automanaged_hosts", "required when cluster.provider is automanaged")
		}
		for i, h := range c.AutomanagedHosts {
			if _, p, err := net.SplitHostPort(h); err != nil || p == "" {
				return errorf(fmt.Sprintf("cluster.automanaged_hosts[%d]", i), "%q is not host:port", h)
			}
		}
		if c.AutomanagedPort < 0 || c.AutomanagedPort > 65535 {
			return errorf("cluster.automanaged_port", "%d is not a port", c.AutomanagedPort)
		}
	default:
		return errorf("cluster.provider", "unknown provider %q (want single, automanaged or etcd)", c.Provider)
	}
	if c.Port < 0 || c.Port > 65535 {
		return errorf("cluster.port", "%d is not a port", c.Port)
	}
	if c.AdvertisedHost != "" {
		_, p, err := net.SplitHostPort(c.AdvertisedHost)
		if n, perr := strconv.Atoi(p); err != nil || perr != nil || n <= 0 || n > 65535 {
			return errorf("cluster.advertised_host", "%q is not host:port", c.AdvertisedHost)
		}
	}
	if c.Shards < 1 || c.Shards > 65536 {
		return errorf("cluster.shards", "%d is not between 1 and 65536", c.Shards)
	}
	if c.ShardLeaseTTL < 2*time.Second || c.ShardLeaseTTL%time.Second != 0 {
		return errorf("cluster.shard_lease_ttl", "%s: etcd grants whole seconds, at least 2", c.ShardLeaseTTL)
	}
	if c.ShardLeaseMargin <= 0 || c.ShardLeaseMargin >= c.ShardLeaseTTL/2 {
		return errorf("cluster.shard_lease_margin", "%s must be positive and under half of shard_lease_ttl", c.ShardLeaseMargin)
	}
	if err := c.EtcdTLS.validate("cluster.etcd_tls"); err != nil {
		return err
	}
	if c.EtcdTLS.Enabled {
		for i, ep := range c.EtcdEndpoints {
			if strings.HasPrefix(ep, "http://") {
				return errorf(fmt.Sprintf("cluster.etcd_endpoints[%d]", i), "%q is plaintext while cluster.etcd_tls is enabled (write host:port or https://)", ep)
			}
		}
	}
	if (c.EtcdUsername == "") != (c.EtcdPassword == "") {
		return errorf("cluster.etcd_username", "etcd_username and etcd_password go together")
	}
	if c.Provider == ProviderEtcd && c.EtcdLeaseTTL < time.Second {
		return errorf("cluster.etcd_lease_ttl", "%s is below etcd's one-second lease granularity", c.EtcdLeaseTTL)
	}
	return nil
}

// RemoteAddr is host:port of the remote listener.
func (c ClusterConfig) RemoteAddr() string { return fmt.Sprintf("%s:%d", c.Host, c.Port) }
