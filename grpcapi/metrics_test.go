package grpcapi

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// Every RPC is counted by method and code and timed; methods nobody
// called yet exist at zero.
func TestRPCMetricsPerMethodAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewServer(Options{Logger: slog.New(slog.DiscardHandler), Metrics: m, ClientTokens: []string{"tok"}})
	m.InitializeMetrics(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	authed := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
	for range 3 {
		if _, err := hc.Check(authed, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = hc.Check(authed, &healthpb.HealthCheckRequest{Service: "no.such.Service"})

	handled := func(code string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "grpc_server_handled_total" {
				continue
			}
			for _, s := range mf.GetMetric() {
				l := map[string]string{}
				for _, p := range s.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["grpc_service"] == "grpc.health.v1.Health" && l["grpc_method"] == "Check" && l["grpc_code"] == code {
					return s.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	if got := handled("OK"); got != 3 {
		t.Errorf("Check OK counted %v times, want 3", got)
	}
	if got := handled("NotFound"); got != 1 {
		t.Errorf("Check NotFound counted %v times, want 1", got)
	}
	out, err := testutil.GatherAndCount(reg, "grpc_server_handling_seconds")
	if err != nil || out == 0 {
		t.Fatalf("no handling-time histogram: %d series, %v", out, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var watch bool
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_started_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "grpc_method" && strings.EqualFold(l.GetValue(), "Watch") {
					watch = true
				}
			}
		}
	}
	if !watch {
		t.Error("Health/Watch, never called, has no series at zero")
	}
}
