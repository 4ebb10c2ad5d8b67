package grpcapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
)

// UserIDHeader names the end user an app backend calls for (gRPC
// metadata, or the HTTP header of the gateway): reads are charged to that
// user's share of the app's read bucket.
const UserIDHeader = "x-user-id"

// SetLimiter makes the room commands pass l's rate limits (nil: none).
// A refused command never reaches its room: RESOURCE_EXHAUSTED with the
// code RATE_LIMITED and a google.rpc.RetryInfo saying when to retry.
func (s *RoomServer) SetLimiter(l *ratelimit.Limiter) { s.limiter = l }

// limit takes a token for p: a command's from its user's share and its
// app's bucket, a read's from its caller's (callerOf).
func (s *RoomServer) limit(ctx context.Context, p room.ClientCommand) (ratelimit.Token, error) {
	if s.limiter == nil {
		return ratelimit.Token{}, nil
	}
	user := p.UserID
	if user == "" || p.Rate == ratelimit.ClassRead {
		user = callerOf(ctx)
	}
	tok, r, ok := s.limiter.Take(p.AppCode, user, p.Rate)
	if ok {
		return tok, nil
	}
	return tok, s.refused(ctx, r)
}

// allow takes a token of typ's class for user (may be "") in app.
func (s *RoomServer) allow(ctx context.Context, app, user, typ string) error {
	if s.limiter == nil {
		return nil
	}
	if r, ok := s.limiter.Allow(app, user, rateClass(typ)); !ok {
		return s.refused(ctx, r)
	}
	return nil
}

// rateClass is the rate class of a call the directory answers (ListRooms)
// or of a room command's type: a read's, or its row in room's command
// table.
func rateClass(typ string) string {
	if ratelimit.IsRead(typ) {
		return ratelimit.ClassRead
	}
	return room.RateClassOf(typ)
}

func (s *RoomServer) refused(ctx context.Context, r ratelimit.Refusal) error {
	err := errclass.WithRetryAfter(fmt.Errorf("%w (%s commands, per %s)", room.ErrRateLimited, r.Class, r.Scope), r.RetryAfter)
	return toStatus(ctx, s.log, err)
}

// callerOf names who makes a call that carries no user of its own (a
// read): the user its app backend names in x-user-id, else the bearer
// token it shows (by a hash: the key is never the secret), else its
// address (for the gateway, the client's, which grpc-gateway appends to
// x-forwarded-for last). The prefixes keep the kinds apart: a user id
// cannot hold ':'.
func callerOf(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, UserIDHeader); len(v) > 0 && room.CheckID(UserIDHeader, v[0]) == nil {
		return v[0]
	}
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		if scheme, token, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			h := sha256.Sum256([]byte(strings.TrimSpace(token)))
			return "token:" + hex.EncodeToString(h[:8])
		}
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "addr:unknown"
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		return "addr:" + tcp.IP.String()
	}
	// The gateway's in-process pipe: the HTTP client's address is the
	// last hop grpc-gateway added.
	if v := metadata.ValueFromIncomingContext(ctx, "x-forwarded-for"); len(v) > 0 {
		hops := strings.Split(v[len(v)-1], ",")
		return "addr:" + strings.TrimSpace(hops[len(hops)-1])
	}
	return "addr:" + p.Addr.String()
}
