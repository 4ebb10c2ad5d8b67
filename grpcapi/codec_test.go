package grpcapi

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// Every roomcell.v1 method, sent a garbage body or a string field with
// invalid UTF-8 over a real connection, answers InvalidArgument, never
// Internal; a caller without a token still gets Unauthenticated first.
func TestBadBodiesAreInvalidArgumentOnEveryMethod(t *testing.T) {
	_, conn := startTCP(t, Options{ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}})
	// Field 1 is a string in every request that has one; 0xff 0xfe is
	// not UTF-8. A tag with wire type 7 does not exist; a length prefix
	// past the end is truncated.
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	bodies := map[string][]byte{
		"garbage":   {0xff, 0xff, 0xff, 0xff},
		"bad tag":   {0x0f, 0x01},
		"truncated": {0x0a, 0x40, 'a'},
	}
	for _, m := range v1Methods(t) {
		name := fullName(m)
		cases := bodies
		if f := m.Input().Fields().ByNumber(1); f != nil && f.Kind().String() == "string" {
			cases = map[string][]byte{"bad utf8": badUTF8}
			for k, v := range bodies {
				cases[k] = v
			}
		}
		for what, body := range cases {
			var out []byte
			err := conn.Invoke(bearerCtx(t, operatorTok), name, &body, &out, grpc.ForceCodecV2(rawCodec{}))
			if status.Code(err) != codes.InvalidArgument {
				// Room requests' UTF-8 check lives in their handlers
				// (validate.go), which the stubs do not run.
				if what == "bad utf8" && strings.HasPrefix(name, "/roomcell.v1.RoomService/") && status.Code(err) == codes.Unimplemented {
					continue
				}
				// A client stream's stub never reads its messages;
				// TestLikeStreamBadBodies sends these to the real one.
				if m.IsStreamingClient() && status.Code(err) == codes.Unimplemented {
					continue
				}
				t.Errorf("%s with %s body: %v, want InvalidArgument", name, what, err)
			}
		}
		garbage, out := bodies["garbage"], []byte(nil)
		err := conn.Invoke(testCtx(t), name, &garbage, &out, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s garbage without token: %v, want Unauthenticated", name, err)
		}
	}
}

// A good body still decodes, and a message carrying the marker field
// itself is refused rather than half-read.
func TestBadBodyMarker(t *testing.T) {
	_, conn := startTCP(t, Options{})
	w := roomcellv1.NewWalletServiceClient(conn)
	if _, err := w.GetBalances(testCtx(t), &roomcellv1.WalletGetBalancesRequest{AppCode: "a", UserId: "u"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("good body: %v", err)
	}
	body := protowire.AppendString(protowire.AppendTag(nil, badBodyField, protowire.BytesType), "x")
	var out []byte
	err := conn.Invoke(testCtx(t), roomcellv1.WalletService_GetBalances_FullMethodName, &body, &out, grpc.ForceCodecV2(rawCodec{}))
	assertCode(t, err, codes.InvalidArgument)
}
