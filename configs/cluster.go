package configs

import (
	"fmt"
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
	// Automanaged: this member's health port and every member's
	// "host:port" health address.
	AutomanagedPort  int           `yaml:"automanaged_port"`
	AutomanagedHosts []string      `yaml:"automanaged_hosts"`
	RefreshInterval  time.Duration `yaml:"refresh_interval"`
	// Etcd endpoints and base key.
	EtcdEndpoints []string `yaml:"etcd_endpoints"`
	EtcdBaseKey   string   `yaml:"etcd_base_key"`
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
}

func (c ClusterConfig) validate() error {
	switch c.Provider {
	case ProviderSingle, ProviderEtcd:
	case ProviderAutomanaged:
		if len(c.AutomanagedHosts) == 0 {
			return errorf("cluster.automanaged_hosts", "required when cluster.provider is automanaged")
		}
	default:
		return errorf("cluster.provider", "unknown provider %q (want single, automanaged or etcd)", c.Provider)
	}
	if c.Port < 0 || c.Port > 65535 {
		return errorf("cluster.port", "%d is not a port", c.Port)
	}
	return nil
}

// RemoteAddr is host:port of the remote listener.
func (c ClusterConfig) RemoteAddr() string { return fmt.Sprintf("%s:%d", c.Host, c.Port) }
