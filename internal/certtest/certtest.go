// Package certtest makes throwaway certificate authorities and
// certificates as PEM files for TLS and mTLS tests. Test support only: it
// must not be imported by production code.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose certificate is in CertFile.
type CA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
	CertFile string
}

// NewCA creates a CA named name in a temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = writePEM(t, ca.dir, name+".crt", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for hosts (DNS names or IPs).
func (ca *CA) Server(t testing.TB, name string, hosts ...string) (certFile, keyFile string) {
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, hosts)
}

// Client issues a client certificate (for mTLS).
func (ca *CA) Client(t testing.TB, name string) (certFile, keyFile string) {
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, nil)
}

// Member issues a certificate valid as both server and client for hosts,
// as a cluster member that serves and dials presents.
func (ca *CA) Member(t testing.TB, name string, hosts ...string) (certFile, keyFile string) {
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, hosts, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, name string, usage x509.ExtKeyUsage, hosts []string, more ...x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.ExtKeyUsage = append([]x509.ExtKeyUsage{usage}, more...)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, ca.dir, name+".crt", "CERTIFICATE", der), writePEM(t, ca.dir, name+".key", "PRIVATE KEY", kb)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// template is a certificate valid from an hour ago for a day.
func template(t testing.TB, name string) *x509.Certificate {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: n,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
