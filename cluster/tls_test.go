//go:build !race

// Several members in one process: see multimember_test.go for why this
// file is left out of -race runs and run by make multimember.

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
	"github.com/hyapp/roomcell/persistence/memdb"
)

const memberName = "roomcell-member"

// memberTLS issues a member certificate (server and client use) signed
// by ca.
func memberTLS(t *testing.T, ca *certtest.CA, name string) configs.ClusterTLSConfig {
	cert, key := ca.Member(t, name, memberName)
	return configs.ClusterTLSConfig{CertFile: cert, KeyFile: key, CAFile: ca.CertFile, ServerName: memberName}
}

// Two members talking mTLS place and forward rooms as usual, and their
// remote port refuses anyone without a member certificate of the CA.
func TestMultiMemberMutualTLS(t *testing.T) {
	ca, other := certtest.NewCA(t, "cluster-ca"), certtest.NewCA(t, "other-ca")
	store := memdb.New()
	base := etcdConfig(t)
	var ns []*node
	for i := range 2 {
		cfg := base
		cfg.TLS = memberTLS(t, ca, fmt.Sprint("member-", i))
		n := startNode(t, fmt.Sprint("tls-", i), memberOpts{cfg: cfg, store: store})
		ns = append(ns, n)
	}
	waitReady(t, ns...)
	waitFor(t, 20*time.Second, "members agree", func() bool { return agreed(ns) })
	rooms := roomIDs(20)
	seqs := createAll(t, ns[0], rooms)
	owned := checkPlacement(t, ns, rooms)
	if len(owned) != 2 {
		t.Fatalf("rooms placed on %d members, want both (forwarding must cross the TLS link): %v", len(owned), owned)
	}
	touchAll(t, ns, rooms, seqs, "tls")

	call := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ns[0].m.Port()), grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = remote.NewRemotingClient(conn).ListProcesses(ctx, &remote.ListProcessesRequest{})
		return err
	}
	clientCreds := func(c configs.ClusterTLSConfig) credentials.TransportCredentials {
		_, cli, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		return credentials.NewTLS(cli)
	}
	// A member certificate gets through TLS to the server, whose unary
	// methods answer Unimplemented (the library's own would panic).
	if err := call(clientCreds(memberTLS(t, ca, "probe"))); status.Code(err) != codes.Unimplemented {
		t.Fatalf("a member certificate: %v, want Unimplemented from the server", err)
	}
	intruder := memberTLS(t, other, "intruder")
	intruder.CAFile = ca.CertFile // trusts the cluster, but is not trusted by it
	if err := call(clientCreds(intruder)); status.Code(err) != codes.Unavailable {
		t.Fatal("a certificate from another CA reached the remote port")
	}
	noCert, err := configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile, ServerName: memberName}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := call(credentials.NewTLS(noCert)); status.Code(err) != codes.Unavailable {
		t.Fatal("a client without a certificate reached the remote port")
	}
	if err := call(insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Fatal("a plaintext client reached the remote port")
	}
}
