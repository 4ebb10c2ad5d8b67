package configs

import (
	"fmt"
	"net"
	"strconv"
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
	// DrainTimeout bounds a graceful leave: deregister, wait for the
	// other members to stop routing here and for local rooms to
	// snapshot and stop. Kubernetes' terminationGracePeriodSeconds must
	// exceed grpc.shutdown_timeout + drain_timeout + a few seconds.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// TLS between members (mTLS); off while cert_file is empty.
	TLS ClusterTLSConfig `yaml:"tls"`
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
	if c.Provider == ProviderEtcd && c.EtcdLeaseTTL < time.Second {
		return errorf("cluster.etcd_lease_ttl", "%s is below etcd's one-second lease granularity", c.EtcdLeaseTTL)
	}
	return nil
}

// RemoteAddr is host:port of the remote listener.
func (c ClusterConfig) RemoteAddr() string { return fmt.Sprintf("%s:%d", c.Host, c.Port) }
