package grpcapi

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
)

// tlsServer serves TLS (mTLS when clientCA is set) and returns a dial
// function for clients with the given TLS settings.
func tlsServer(t *testing.T, ca *certtest.CA, clientCA string) func(creds credentials.TransportCredentials) error {
	t.Helper()
	cert, key := ca.Server(t, "server", "127.0.0.1", "localhost")
	tc, err := configs.ServerTLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: clientCA}.Load()
	if err != nil {
		t.Fatal(err)
	}
	_, conn := startTCP(t, Options{TLS: tc}, grpc.WithTransportCredentials(insecure.NewCredentials()))
	addr := conn.Target()
	return func(creds credentials.TransportCredentials) error {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = healthpb.NewHealthClient(c).Check(testCtx(t), &healthpb.HealthCheckRequest{})
		return err
	}
}

func clientCreds(t *testing.T, c configs.ClientTLSConfig) credentials.TransportCredentials {
	t.Helper()
	c.Enabled = true
	tc, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(tc)
}

func TestTLS(t *testing.T) {
	ca, other := certtest.NewCA(t, "roomcell-ca"), certtest.NewCA(t, "other-ca")
	call := tlsServer(t, ca, "")
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: ca.CertFile})); err != nil {
		t.Fatalf("TLS client trusting the CA: %v", err)
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Fatal("plaintext client reached a TLS server")
	}
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: other.CertFile})); err == nil {
		t.Fatal("client trusting another CA accepted the server")
	}
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: ca.CertFile, ServerName: "elsewhere.example"})); err == nil {
		t.Fatal("client accepted a certificate for another name")
	}
}

func TestMutualTLS(t *testing.T) {
	ca, other := certtest.NewCA(t, "roomcell-ca"), certtest.NewCA(t, "other-ca")
	clientCA := certtest.NewCA(t, "client-ca")
	call := tlsServer(t, ca, clientCA.CertFile)
	cert, key := clientCA.Client(t, "roomctl")
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: ca.CertFile, CertFile: cert, KeyFile: key})); err != nil {
		t.Fatalf("mTLS client with a good certificate: %v", err)
	}
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: ca.CertFile})); err == nil {
		t.Fatal("mTLS server accepted a client without a certificate")
	}
	badCert, badKey := other.Client(t, "intruder")
	if err := call(clientCreds(t, configs.ClientTLSConfig{CAFile: ca.CertFile, CertFile: badCert, KeyFile: badKey})); err == nil {
		t.Fatal("mTLS server accepted a client certificate from another CA")
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Fatal("plaintext client reached an mTLS server")
	}
}
