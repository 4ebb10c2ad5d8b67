package grpcapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
)

// SetLimiter makes the room commands pass l's rate limits (nil: none).
// A refused command never reaches its room: RESOURCE_EXHAUSTED with the
// code RATE_LIMITED and a google.rpc.RetryInfo saying when to retry.
func (s *RoomServer) SetLimiter(l *ratelimit.Limiter) { s.limiter = l }

// limit takes a token for rc from its user's and app's buckets.
func (s *RoomServer) limit(ctx context.Context, rc *roomcellv1.RoomCommand) error {
	if s.limiter == nil {
		return nil
	}
	req := room.Request(rc)
	typ := strings.TrimSuffix(string(req.ProtoReflect().Descriptor().Name()), "Request")
	var user string
	if u, ok := req.(interface{ GetUserId() string }); ok {
		user = u.GetUserId()
	}
	app, _ := room.KeyOf(rc)
	return s.allow(ctx, app, user, typ)
}

// allow takes a token of typ's class for user (may be "") in app.
func (s *RoomServer) allow(ctx context.Context, app, user, typ string) error {
	if s.limiter == nil {
		return nil
	}
	r, ok := s.limiter.Allow(app, user, typ)
	if ok {
		return nil
	}
	err := errclass.WithRetryAfter(fmt.Errorf("%w (%s commands, per %s)", room.ErrRateLimited, r.Class, r.Scope), r.RetryAfter)
	return toStatus(ctx, s.log, err)
}
