package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"gopkg.in/yaml.v3"

	"github.com/hyapp/roomcell/errclass"
)

// DefaultMaxBodyBytes bounds a gateway request's body: a room command's
// JSON is well under 4 KiB.
const DefaultMaxBodyBytes = 64 << 10

// maxHeaderBytes bounds a gateway request's headers: a token and a
// request id, nothing larger.
const maxHeaderBytes = 32 << 10

// The gateway's own refusals, before a request reaches the gRPC server.
var (
	errTooLarge      = errclass.New(errclass.CodeRequestTooLarge)
	errWrongMethod   = errclass.New(errclass.CodeMethodNotAllowed)
	errNoRoute       = errclass.New(errclass.CodeNoRoute)
	errBadBody       = errclass.New(errclass.CodeBadBody)
	errSlowBody      = errclass.New(errclass.CodeRequestTimeout)
	errGatewayBroken = errors.New("gateway: call failed before reaching the server")
)

// gatewayRoute is one rule of gateway.yaml.
type gatewayRoute struct {
	method string // HTTP method
	path   []string
	rpc    string // "/roomcell.v1.RoomService/CreateRoom"
	class  Class
	stream bool // a server stream: no write deadline
}

// loadGatewayRoutes reads the rules of a gateway.yaml. A rule naming an
// RPC this binary does not know is an error: the gateway would not know
// who may call it.
func loadGatewayRoutes(rules []byte) ([]gatewayRoute, error) {
	var doc struct {
		HTTP struct {
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		return nil, fmt.Errorf("gateway rules: %w", err)
	}
	var out []gatewayRoute
	for _, r := range doc.HTTP.Rules {
		sel, _ := r["selector"].(string)
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sel))
		md, ok := d.(protoreflect.MethodDescriptor)
		if err != nil || !ok {
			return nil, fmt.Errorf("gateway rules: selector %q is no RPC of this binary", sel)
		}
		for _, m := range []string{"get", "post", "put", "delete", "patch"} {
			p, ok := r[m].(string)
			if !ok {
				continue
			}
			out = append(out, gatewayRoute{
				method: strings.ToUpper(m), path: strings.Split(strings.TrimPrefix(p, "/"), "/"),
				rpc:   "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
				class: accessClass(md), stream: md.IsStreamingServer(),
			})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("gateway rules: no route")
	}
	return out, nil
}

// matches says whether an URL path fits the route's template: a
// "{field}" segment takes any one segment, "{field=**}" the rest.
func (r gatewayRoute) matches(path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, t := range r.path {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "=**}") {
			return i < len(segs)
		}
		if i >= len(segs) {
			return false
		}
		if strings.HasPrefix(t, "{") && segs[i] != "" {
			continue
		}
		if t != segs[i] {
			return false
		}
	}
	return len(segs) == len(r.path)
}

// door is what a gateway request passes before grpc-gateway reads its
// body: the route's access class against the Authorization header, then
// the body's size and read time. Each refusal is the project's JSON error
// (the gRPC status with its ErrorInfo code) under its HTTP status.
type door struct {
	routes  []gatewayRoute
	auth    *tokenAuth // nil: every route is open (no tokens configured)
	maxBody int64
	log     *slog.Logger
	mux     *runtime.ServeMux
}

func (d *door) route(method, path string) *gatewayRoute {
	for i := range d.routes {
		if r := &d.routes[i]; r.method == method && r.matches(path) {
			return r
		}
	}
	return nil
}

// allowed lists the methods some route takes for path.
func (d *door) allowed(path string) []string {
	var out []string
	for _, r := range d.routes {
		if r.matches(path) && !slices.Contains(out, r.method) {
			out = append(out, r.method)
		}
	}
	slices.Sort(out)
	return out
}

// handler caps every body before anything can read it (grpc-gateway's
// routing parses forms on some paths): past maxBody a read fails.
func (d *door) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, d.maxBody)
		next.ServeHTTP(w, r)
	})
}

// middleware runs after routing and before the generated handler decodes
// anything: the token first (a caller without one learns nothing, not
// even whether its body is too large), then the body, read whole under
// maxBody and gateway.read_timeout, so the handler decodes bytes already
// here.
func (d *door) middleware(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		rt := d.route(r.Method, r.URL.Path)
		if rt == nil {
			// The mux routed it by a rule this table lacks: fail closed.
			d.log.ErrorContext(r.Context(), "gateway route missing from the rules", "method", r.Method, "path", r.URL.Path)
			d.refuse(w, r, errNoRoute, http.StatusNotFound)
			return
		}
		if d.auth != nil {
			if err := refusal(rt.class, d.auth.classOf(r.Header.Values("Authorization"))); err != nil {
				d.refuse(w, r, err, 0)
				return
			}
		}
		if r.ContentLength > d.maxBody {
			d.refuse(w, r, errTooLarge, http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			var ne net.Error
			switch {
			case errors.As(err, &tooLarge):
				d.refuse(w, r, errTooLarge, http.StatusRequestEntityTooLarge)
			case errors.As(err, &ne) && ne.Timeout():
				d.refuse(w, r, errSlowBody, http.StatusRequestTimeout)
			default:
				d.refuse(w, r, fmt.Errorf("%w: %v", errBadBody, err), 0)
			}
			return
		}
		rc := http.NewResponseController(w)
		// The body is in: from here the server's read deadline
		// (gateway.read_timeout) would only cancel a long call's context.
		_ = rc.SetReadDeadline(time.Time{})
		if rt.stream {
			// A watch lives as long as its client reads it.
			_ = rc.SetWriteDeadline(time.Time{})
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next(w, r, params)
	}
}

// refuse answers err, as toStatus shapes it, under httpStatus (0: the
// status code's own HTTP equivalent). A body left unread closes the
// connection instead of being drained.
func (d *door) refuse(w http.ResponseWriter, r *http.Request, err error, httpStatus int) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	st := toStatus(r.Context(), d.log, err)
	if httpStatus != 0 {
		st = &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: st}
	}
	_, out := runtime.MarshalerForRequest(d.mux, r)
	runtime.DefaultHTTPErrorHandler(r.Context(), d.mux, out, w, r, st)
}

// routingError answers a request no route takes: 405 with Allow when the
// path has routes under other methods, else 404 (grpc-gateway's own
// answer to a wrong method is 501).
func (d *door) routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", strings.Join(d.allowed(r.URL.Path), ", "))
		d.refuse(w, r, errWrongMethod, http.StatusMethodNotAllowed)
	case http.StatusNotFound:
		d.refuse(w, r, errNoRoute, http.StatusNotFound)
	default:
		d.refuse(w, r, fmt.Errorf("%w: malformed path", errBadBody), http.StatusBadRequest)
	}
}

// errorHandler answers a call's error. One the gRPC server answered
// passes as it is (it is the vocabulary already); one raised on the
// gateway's side of the pipe (a body grpc-gateway could not decode, a
// refusal by grpc-go itself) is put into the vocabulary first, so no
// grpc-go text and no 429 for a size reaches a client.
func (d *door) errorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	var custom *runtime.HTTPStatusError
	if errors.As(err, &custom) {
		runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
		return
	}
	st := status.Convert(err)
	if codeOf(st) == 0 && !answeredByServer(ctx) {
		st, httpStatus := gatewaySide(ctx, d.log, st)
		if httpStatus != 0 {
			err = &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: st}
		} else {
			err = st
		}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
}

// answeredByServer says whether the call reached roomcell's interceptors,
// which always send the request id header.
func answeredByServer(ctx context.Context) bool {
	md, ok := runtime.ServerMetadataFromContext(ctx)
	return ok && len(md.HeaderMD.Get(RequestIDHeader)) > 0
}

// gatewaySide is the vocabulary's error for a status raised before
// roomcell's server saw the call, and its HTTP status (0: the code's).
func gatewaySide(ctx context.Context, log *slog.Logger, st *status.Status) (error, int) {
	switch st.Code() {
	case codes.InvalidArgument:
		// grpc-gateway's decode errors: protojson's text says where.
		return toStatus(ctx, log, fmt.Errorf("%w: %s", errBadBody, st.Message())), 0
	case codes.ResourceExhausted:
		// grpc-go's message size limit.
		return toStatus(ctx, log, errTooLarge), http.StatusRequestEntityTooLarge
	case codes.Unavailable:
		return toStatus(ctx, log, errclass.Errorf(errclass.Unavailable, "%w: %s", errGatewayBroken, st.Message())), 0
	case codes.DeadlineExceeded:
		return toStatus(ctx, log, context.DeadlineExceeded), 0
	case codes.Canceled:
		return toStatus(ctx, log, context.Canceled), 0
	}
	return toStatus(ctx, log, fmt.Errorf("%w: %s", errGatewayBroken, st.Err())), 0
}
