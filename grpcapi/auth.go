package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// Class is who may call an RPC.
type Class int

const (
	// ClassNone: the method has no access option; nobody may call it (a
	// service registered without a decision fails closed).
	ClassNone Class = iota
	// ClassPublic needs no token: health and reflection, which load
	// balancers and grpcurl must reach and which reveal nothing about rooms.
	ClassPublic
	// ClassClient takes a client or an operator token.
	ClassClient
	// ClassOperator takes an operator token only.
	ClassOperator
)

func (c Class) String() string {
	switch c {
	case ClassPublic:
		return "public"
	case ClassClient:
		return "client"
	case ClassOperator:
		return "operator"
	}
	return "none"
}

// publicMethods are the methods of services roomcell registers but does
// not declare: health and reflection, which load balancers and grpcurl
// must reach and which reveal nothing about rooms.
var publicMethods = []string{
	"/grpc.health.v1.Health/Check",
	"/grpc.health.v1.Health/List",
	"/grpc.health.v1.Health/Watch",
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}

// methodClasses is who may call what: the public methods above, and every
// roomcell.v1 RPC by the access option beside its declaration in the
// proto (api/roomcellv1/options.proto), read once from the descriptors.
var methodClasses = func() map[string]Class {
	m := make(map[string]Class)
	for _, n := range publicMethods {
		m[n] = ClassPublic
	}
	for _, md := range protoMethods() {
		m["/"+string(md.Parent().FullName())+"/"+string(md.Name())] = accessClass(md)
	}
	return m
}()

// protoMethods is every method of every service in the roomcell.v1 proto
// package, registered on a server or not.
func protoMethods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("roomcell.v1", func(f protoreflect.FileDescriptor) bool {
		for i := 0; i < f.Services().Len(); i++ {
			ms := f.Services().Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				out = append(out, ms.Get(j))
			}
		}
		return true
	})
	return out
}

// accessClass is the class of a method by its access option; ClassNone
// when it has none.
func accessClass(md protoreflect.MethodDescriptor) Class {
	switch proto.GetExtension(md.Options(), v1.E_Access).(v1.Access) {
	case v1.Access_ACCESS_PUBLIC:
		return ClassPublic
	case v1.Access_ACCESS_CLIENT:
		return ClassClient
	case v1.Access_ACCESS_OPERATOR:
		return ClassOperator
	}
	return ClassNone
}

// MethodClass returns the class of a full method name ("/pkg.Svc/M");
// ClassNone for a method with no access option.
func MethodClass(fullMethod string) Class { return methodClasses[fullMethod] }

// RequestClass is MethodClass refined by the request: a free VIP grant
// through PurchaseVip is an operator call.
func RequestClass(fullMethod string, req any) Class {
	c := MethodClass(fullMethod)
	if c == ClassClient && operatorRequest(req) {
		return ClassOperator
	}
	return c
}

func operatorRequest(req any) bool {
	if r, ok := req.(*v1.WalletPurchaseVipRequest); ok {
		// Only the paid source is a client's; anything else, even a value
		// validation will refuse, is treated as a grant.
		return r.GetSource() != "" && r.GetSource() != "vip_purchase"
	}
	return false
}

// tokenAuth checks "authorization: Bearer <token>" against the class of
// the method. Tokens are hashed first so the constant-time compare does
// not leak a token's length.
type tokenAuth struct {
	client, operator [][sha256.Size]byte
}

func newTokenAuth(client, operator []string) *tokenAuth {
	hash := func(ts []string) [][sha256.Size]byte {
		out := make([][sha256.Size]byte, len(ts))
		for i, t := range ts {
			out[i] = sha256.Sum256([]byte(t))
		}
		return out
	}
	return &tokenAuth{client: hash(client), operator: hash(operator)}
}

// callerClass is the strongest class a presented token opens, ClassNone
// for no or an unknown token.
func (a *tokenAuth) callerClass(ctx context.Context) Class {
	return a.classOf(metadata.ValueFromIncomingContext(ctx, "authorization"))
}

// classOf is the strongest class the authorization values open (gRPC
// metadata or HTTP headers). Every configured token is compared, so the
// time taken does not tell which list matched.
func (a *tokenAuth) classOf(authorization []string) Class {
	got := ClassNone
	for _, v := range authorization {
		scheme, token, ok := strings.Cut(v, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			continue
		}
		h := sha256.Sum256([]byte(strings.TrimSpace(token)))
		for _, w := range a.operator {
			if subtle.ConstantTimeCompare(h[:], w[:]) == 1 {
				got = ClassOperator
			}
		}
		for _, w := range a.client {
			if subtle.ConstantTimeCompare(h[:], w[:]) == 1 && got < ClassClient {
				got = ClassClient
			}
		}
	}
	return got
}

// The door's refusals: coded like every other error (errclass), so a
// client branches on the reason whether it came by gRPC or HTTP.
var (
	errNoToken     = errclass.New(errclass.CodeUnauthenticated)
	errNotOperator = errclass.New(errclass.CodeOperatorOnly)
	errNoClass     = status.Error(codes.PermissionDenied, "this method has no access class; nobody may call it")
)

// refusal is the status of a class check's failure, nil when it passed.
func refusal(need, have Class) error {
	switch {
	case need == ClassPublic:
		return nil
	case need == ClassNone:
		return errNoClass
	case have == ClassNone:
		return toStatus(context.Background(), nil, errNoToken)
	case have < need:
		return toStatus(context.Background(), nil, errNotOperator)
	}
	return nil
}

func (a *tokenAuth) check(ctx context.Context, need Class) error {
	if need == ClassPublic {
		return nil
	}
	return refusal(need, a.callerClass(ctx))
}

// CallerClass is the class the caller's token opened, as the gate found
// it; ok false on a server without tokens (every call open, nobody
// identified) and for a public method.
func CallerClass(ctx context.Context) (c Class, ok bool) {
	if k := callOf(ctx); k != nil && k.classSet {
		return k.class, true
	}
	return ClassNone, false
}

// UnclassifiedMethods lists the methods registered on srv that have no
// class; the process refuses to start while any exists, so a new service
// cannot ship without a decision on who may call it.
func UnclassifiedMethods(srv *grpc.Server) []string {
	var out []string
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			if n := "/" + svc + "/" + m.Name; MethodClass(n) == ClassNone {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// BearerToken is the per-RPC credential of a caller holding token. It
// does not demand TLS so a loopback or private-network deployment works;
// anywhere else serve grpc.tls, or the token travels in clear.
type BearerToken string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t BearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (BearerToken) RequireTransportSecurity() bool { return false }
