package grpcapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"gopkg.in/yaml.v3"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

const (
	gatewayYAML = "../api/roomcellv1/gateway.yaml"
	gatewayDoc  = "api/roomcellv1/gateway.yaml"
)

// gatewayRule is one http rule of gateway.yaml.
type gatewayRule struct {
	Selector string `yaml:"selector"`
	Get      string `yaml:"get"`
	Post     string `yaml:"post"`
	Body     string `yaml:"body"`
}

func (r gatewayRule) method() string {
	if r.Get != "" {
		return http.MethodGet
	}
	return http.MethodPost
}

func (r gatewayRule) path() string { return r.Get + r.Post }

func readGatewayRules(t *testing.T) []gatewayRule {
	t.Helper()
	b, err := os.ReadFile(gatewayYAML)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		HTTP struct {
			Rules []gatewayRule `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.HTTP.Rules) == 0 {
		t.Fatalf("%s has no http rules", gatewayYAML)
	}
	return doc.HTTP.Rules
}

// apiMethods is every RPC of the roomcell.v1 services with its access
// class, read from the compiled descriptors.
func apiMethods() map[string]protoreflect.MethodDescriptor {
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("roomcell.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				out[string(md.FullName())] = md
			}
		}
		return true
	})
	return out
}

func accessOf(md protoreflect.MethodDescriptor) roomcellv1.Access {
	return proto.GetExtension(md.Options(), roomcellv1.E_Access).(roomcellv1.Access)
}

var upperRun = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// suggestRule is the line a new client RPC needs in gateway.yaml: reads
// and streams are GET with query parameters, commands POST with a body.
func suggestRule(md protoreflect.MethodDescriptor) string {
	name := string(md.Name())
	kebab := strings.ToLower(upperRun.ReplaceAllString(name, "$1-$2"))
	prefix := "/api/v1/rooms/"
	if md.Parent().Name() != "RoomService" {
		prefix = "/api/v1/" + strings.ToLower(strings.TrimSuffix(string(md.Parent().Name()), "Service")) + "/"
	}
	if md.IsStreamingServer() || strings.HasPrefix(name, "Get") || strings.HasPrefix(name, "List") {
		return fmt.Sprintf("  - {selector: %s, get: %s%s}", md.FullName(), prefix, kebab)
	}
	return fmt.Sprintf(`  - {selector: %s, post: %s%s, body: "*"}`, md.FullName(), prefix, kebab)
}

// Every RPC a client may call (access class ACCESS_CLIENT in the proto)
// has an HTTP route, and no operator RPC has one: the gateway is the
// client API over HTTP, all of it and nothing more, but for the client
// streams (LikeStream), which grpc-gateway cannot serve: they have none,
// and their unary twins (LikeRoom) theirs.
func TestGatewayRouteForEveryClientRPC(t *testing.T) {
	rules := readGatewayRules(t)
	methods := apiMethods()
	routed := map[string]bool{}
	paths := map[string]string{}
	for _, r := range rules {
		md, ok := methods[r.Selector]
		if !ok {
			t.Errorf("%s: rule for %s, which is no roomcell.v1 RPC", gatewayDoc, r.Selector)
			continue
		}
		if a := accessOf(md); a != roomcellv1.Access_ACCESS_CLIENT {
			t.Errorf("%s: %s is %v, only ACCESS_CLIENT RPCs belong on the client gateway", gatewayDoc, r.Selector, a)
		}
		if (r.Get == "") == (r.Post == "") {
			t.Errorf("%s: %s needs exactly one of get/post", gatewayDoc, r.Selector)
		}
		if r.Post != "" && r.Body != "*" {
			t.Errorf(`%s: %s: a POST takes the request as its body (body: "*")`, gatewayDoc, r.Selector)
		}
		if md.IsStreamingClient() {
			t.Errorf("%s: %s streams from the client, which the gateway cannot carry (grpc-gateway serves no bidirectional or client streams): no route", gatewayDoc, r.Selector)
		}
		if md.IsStreamingServer() && r.Get == "" {
			t.Errorf("%s: %s streams: GET, one JSON object a line", gatewayDoc, r.Selector)
		}
		key := r.method() + " " + r.path()
		if prev, dup := paths[key]; dup {
			t.Errorf("%s: %s is the route of both %s and %s", gatewayDoc, key, prev, r.Selector)
		}
		paths[key] = r.Selector
		if routed[r.Selector] {
			t.Errorf("%s: %s has two rules", gatewayDoc, r.Selector)
		}
		routed[r.Selector] = true
	}
	var missing []string
	for name, md := range methods {
		// A client stream (LikeStream) has no HTTP form: its unary twin
		// (LikeRoom) is the gateway's route, checked like every other.
		if accessOf(md) == roomcellv1.Access_ACCESS_CLIENT && !routed[name] && !md.IsStreamingClient() {
			missing = append(missing, suggestRule(md))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("client RPCs without an HTTP route: add these lines (or your own paths) to %s under http.rules,\n"+
			"run `make proto`, and add the routes to README's \"HTTP/JSON gateway\" table:\n%s",
			gatewayYAML, strings.Join(missing, "\n"))
	}
}

// The generated handlers serve every rule: a request to each route
// reaches the gRPC server as that RPC (a server that knows no service
// records the method each request arrives as).
func TestGatewayRoutesReachTheirRPC(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(ss)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		return status.Error(codes.Unavailable, "recorded")
	}))
	pipe := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(pipe) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///routes",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return pipe.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mux, err := newGatewayMux(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readGatewayRules(t) {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		var body *strings.Reader
		if r.method() == http.MethodPost {
			body = strings.NewReader("{}")
		} else {
			body = strings.NewReader("")
		}
		req := httptest.NewRequest(r.method(), r.path(), body)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		want := "/" + r.Selector[:strings.LastIndex(r.Selector, ".")] + "/" + r.Selector[strings.LastIndex(r.Selector, ".")+1:]
		mu.Lock()
		reached := append([]string(nil), got...)
		mu.Unlock()
		if len(reached) != 1 || reached[0] != want {
			t.Errorf("%s %s (%s): reached %v, want [%s] (HTTP %d %s)", r.method(), r.path(), r.Selector, reached, want, rec.Code, rec.Body.String())
		}
		if !strings.Contains(rec.Body.String(), "recorded") && !strings.Contains(rec.Body.String(), "UNAVAILABLE") {
			t.Errorf("%s %s: the RPC's error did not come back: %d %s", r.method(), r.path(), rec.Code, rec.Body.String())
		}
	}
}
