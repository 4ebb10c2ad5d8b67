package grpcapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"sort"
	"strings"

	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Class is who may call an RPC.
type Class int

const (
	// ClassNone: the method is in no table; nobody may call it (a service
	// registered without a decision fails closed).
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

// methodClasses is the one table of who may call what. A client token is
// what the app backend holds to act for its users; anything that creates
// money or VIP, charges outside a room, or repairs and inspects the
// system is an operator's.
var methodClasses = map[string]Class{
	"/grpc.health.v1.Health/Check":                                   ClassPublic,
	"/grpc.health.v1.Health/List":                                    ClassPublic,
	"/grpc.health.v1.Health/Watch":                                   ClassPublic,
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      ClassPublic,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": ClassPublic,

	v1.RoomService_CreateRoom_FullMethodName:  ClassClient,
	v1.RoomService_JoinRoom_FullMethodName:    ClassClient,
	v1.RoomService_LeaveRoom_FullMethodName:   ClassClient,
	v1.RoomService_TakeMic_FullMethodName:     ClassClient,
	v1.RoomService_ReleaseMic_FullMethodName:  ClassClient,
	v1.RoomService_SendGift_FullMethodName:    ClassClient,
	v1.RoomService_KickUser_FullMethodName:    ClassClient,
	v1.RoomService_CloseRoom_FullMethodName:   ClassClient,
	v1.RoomService_Heartbeat_FullMethodName:   ClassClient,
	v1.RoomService_GetRoom_FullMethodName:     ClassClient,
	v1.RoomService_ListRooms_FullMethodName:   ClassClient,
	v1.RoomService_GetUserRoom_FullMethodName: ClassClient,
	// Owner/admin commands: the room checks the role of user_id.
	v1.RoomService_SetAdmin_FullMethodName:    ClassClient,
	v1.RoomService_RemoveAdmin_FullMethodName: ClassClient,
	v1.RoomService_MuteSeat_FullMethodName:    ClassClient,
	v1.RoomService_UnmuteSeat_FullMethodName:  ClassClient,
	v1.RoomService_LockSeat_FullMethodName:    ClassClient,
	v1.RoomService_UnlockSeat_FullMethodName:  ClassClient,
	v1.RoomService_UpdateRoom_FullMethodName:  ClassClient,

	v1.WalletService_GetBalances_FullMethodName: ClassClient,
	// PurchaseVip is a client's when the user pays; free sources are
	// operator grants (see operatorRequest).
	v1.WalletService_PurchaseVip_FullMethodName: ClassClient,
	v1.WalletService_Credit_FullMethodName:      ClassOperator,
	// The room is DebitGift's only legitimate caller: in process, or with
	// the operator token of wallet.auth_token when the wallet is remote.
	v1.WalletService_DebitGift_FullMethodName: ClassOperator,
	// The same holds for a gift's reserve → confirm / refund and the
	// reconciler's scan, called by room nodes when the wallet is remote.
	v1.WalletService_HoldGift_FullMethodName:          ClassOperator,
	v1.WalletService_ConfirmGift_FullMethodName:       ClassOperator,
	v1.WalletService_RefundGift_FullMethodName:        ClassOperator,
	v1.WalletService_ListOpenGiftHolds_FullMethodName: ClassOperator,

	v1.OutboxAdmin_ListOutbox_FullMethodName:    ClassOperator,
	v1.OutboxAdmin_GetOutbox_FullMethodName:     ClassOperator,
	v1.OutboxAdmin_RetryOutbox_FullMethodName:   ClassOperator,
	v1.OutboxAdmin_SkipOutbox_FullMethodName:    ClassOperator,
	v1.PurgeAdmin_PurgeStatus_FullMethodName:    ClassOperator,
	v1.NoticeAdmin_ListNotices_FullMethodName:   ClassOperator,
	v1.NoticeAdmin_GetNotice_FullMethodName:     ClassOperator,
	v1.NoticeAdmin_RequeueNotice_FullMethodName: ClassOperator,
	v1.ClusterAdmin_Members_FullMethodName:      ClassOperator,
	v1.ClusterAdmin_WhereIsRoom_FullMethodName:  ClassOperator,
}

// MethodClass returns the class of a full method name ("/pkg.Svc/M");
// ClassNone for a method in no table.
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
// for no or an unknown token. Every configured token is compared, so the
// time taken does not tell which list matched.
func (a *tokenAuth) callerClass(ctx context.Context) Class {
	got := ClassNone
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
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

var (
	errNoToken     = status.Error(codes.Unauthenticated, "missing or invalid bearer token (metadata authorization: Bearer <token>)")
	errNotOperator = status.Error(codes.PermissionDenied, "this call needs an operator token; a client token cannot make it")
	errNoClass     = status.Error(codes.PermissionDenied, "this method has no access class; nobody may call it")
)

func (a *tokenAuth) check(ctx context.Context, need Class) error {
	switch need {
	case ClassPublic:
		return nil
	case ClassNone:
		return errNoClass
	}
	switch have := a.callerClass(ctx); {
	case have == ClassNone:
		return errNoToken
	case have < need:
		return errNotOperator
	}
	return nil
}

func (a *tokenAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, RequestClass(info.FullMethod, req)); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Streams are checked by method alone: no roomcell RPC streams, so only
// health Watch and reflection (both public) arrive here today.
func (a *tokenAuth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), MethodClass(info.FullMethod)); err != nil {
		return err
	}
	return handler(srv, ss)
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
