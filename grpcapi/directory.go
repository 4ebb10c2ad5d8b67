package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Room directory reads: the RoomService's ListRooms and GetUserRoom answer
// from the directory (persistence.Directory), not from the room grains, so
// a listing never wakes a room. The directory trails the rooms by at most
// one refresh; a directory outage answers Unavailable and never touches
// room commands.

// DirectoryReader is what ListRooms and GetUserRoom read;
// persistence.Directory satisfies it.
type DirectoryReader interface {
	ListRooms(ctx context.Context, appCode string, offset, limit int) (persistence.RoomPage, error)
	UserRoom(ctx context.Context, appCode, userID string) (persistence.UserRoom, error)
}

// Page sizes of ListRooms, and the deepest offset a page token may name
// (a ranking is read from the top; deep paging is a scan).
const (
	DefaultRoomsPageSize = 20
	MaxRoomsPageSize     = 100
	maxRoomsOffset       = 100_000
	// MaxRoomsScan bounds the ranking entries one ListRooms reads to fill
	// a filtered page: a filter few rooms match gives a short page (even
	// an empty one) with a next_page_token where the scan stopped.
	MaxRoomsScan   = 1000
	roomsScanChunk = 100
	// A walk through the pages reads one snapshot of the ranking
	// (persistence.RankingSnapshots): walks started within
	// RoomsSnapshotWindow of each other share a copy (so a first page is
	// at most that stale, and an app keeps at most TTL/window copies),
	// and a snapshot lives RoomsSnapshotTTL after its last page read.
	RoomsSnapshotWindow = time.Second
	RoomsSnapshotTTL    = time.Minute
)

// SetDirectory gives the server the directory ListRooms and GetUserRoom
// read. Call it before serving; without one both answer Unimplemented.
func (s *RoomServer) SetDirectory(d DirectoryReader) { s.dir = d }

func init() {
	registerValidated(&roomcellv1.ListRoomsRequest{}, &roomcellv1.GetUserRoomRequest{})
}

var errNoDirectory = status.Error(codes.Unimplemented, "the room directory is not configured on this server")

// roomsToken is where a walk resumes: an offset in the snapshot named
// by snap ("<snap>.<offset>"), or, for a directory without snapshots, in
// the live ranking ("<offset>").
type roomsToken struct {
	snap   string
	offset int
}

func parseRoomsToken(tok string) (roomsToken, bool) {
	snap, off, hasSnap := strings.Cut(tok, ".")
	if !hasSnap {
		off, snap = snap, ""
	}
	n, err := strconv.Atoi(off)
	if err != nil || n < 0 || n > maxRoomsOffset || hasSnap && (snap == "" || room.CheckID("page_token", snap) != nil) {
		return roomsToken{}, false
	}
	return roomsToken{snap: snap, offset: n}, true
}

func (t roomsToken) String() string {
	if t.snap == "" {
		return strconv.Itoa(t.offset)
	}
	return t.snap + "." + strconv.Itoa(t.offset)
}

// errUnlistedNotYours: a client's "my rooms" must be its own.
var errUnlistedNotYours = errclass.Errorf(errclass.Permission, "unlisted rooms are listed to their owner only: send the owner's id as x-user-id, equal to owner_user_id (an operator token lists any owner's)")

// listScope is who asks for a list: on a server with tokens, a client
// sees unlisted rooms of the user it names in x-user-id only, an operator
// any owner's, and may list the whole app with visibility "all" and no
// owner. On a server without tokens every call is open (loopback, dev)
// and nobody is identified: an owner's list is trusted.
type listScope struct {
	operator bool   // an operator token
	user     string // a client's x-user-id; checked only when client is set
	client   bool   // a client token on a server with tokens
}

func listScopeOf(ctx context.Context) listScope {
	c, ok := CallerClass(ctx)
	if !ok {
		return listScope{}
	}
	sc := listScope{operator: c == ClassOperator, client: c != ClassOperator}
	if v := metadata.ValueFromIncomingContext(ctx, UserIDHeader); len(v) > 0 {
		sc.user = v[0]
	}
	return sc
}

func validateListRooms(r *roomcellv1.ListRoomsRequest, sc listScope) (tok roomsToken, size int, f persistence.RoomFilter, err error) {
	if err := room.CheckID("app_code", r.GetAppCode()); err != nil {
		return tok, 0, f, err
	}
	if err := checkOptionalID("request_id", r.GetRequestId()); err != nil {
		return tok, 0, f, err
	}
	if err := checkOptionalID("category", r.GetCategory()); err != nil {
		return tok, 0, f, err
	}
	if err := checkOptionalID("owner_user_id", r.GetOwnerUserId()); err != nil {
		return tok, 0, f, err
	}
	f = persistence.RoomFilter{Category: r.GetCategory(), Owner: r.GetOwnerUserId()}
	// Unlisted rooms are listed to their owner only (operators: all).
	switch v := r.GetVisibility(); v {
	case "", room.VisibilityPublic:
	case room.VisibilityUnlisted, "all":
		switch {
		case f.Owner == "" && v == "all" && sc.operator:
			// The operator's form: every room of the app.
		case f.Owner == "":
			return tok, 0, f, errclass.Invalidf("visibility %q needs owner_user_id (or an operator token, for \"all\")", v)
		case sc.client && sc.user != f.Owner:
			return tok, 0, f, errUnlistedNotYours
		}
		f.Visibility, f.AnyVisibility = room.VisibilityUnlisted, v == "all"
	default:
		return tok, 0, f, errclass.Invalidf("visibility must be public, unlisted or all, got %q", v)
	}
	size = int(r.GetPageSize())
	switch {
	case size < 0 || size > MaxRoomsPageSize:
		return tok, 0, f, errclass.Invalidf("page_size must be between 0 (default %d) and %d, got %d", DefaultRoomsPageSize, MaxRoomsPageSize, size)
	case size == 0:
		size = DefaultRoomsPageSize
	}
	if t := r.GetPageToken(); t != "" {
		var ok bool
		if tok, ok = parseRoomsToken(t); !ok {
			return tok, 0, f, errclass.Invalidf("page_token is not one this server returned")
		}
	}
	return tok, size, f, nil
}

func validateGetUserRoom(r *roomcellv1.GetUserRoomRequest) error {
	if err := room.CheckID("app_code", r.GetAppCode()); err != nil {
		return err
	}
	if err := room.CheckID("user_id", r.GetUserId()); err != nil {
		return err
	}
	return checkOptionalID("request_id", r.GetRequestId())
}

// directoryErr gives a directory error the class toStatus maps.
func directoryErr(err error, notFound string) error {
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return errclass.Errorf(errclass.NotFound, "%s", notFound)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, persistence.ErrUnavailable):
		return err
	}
	return errclass.Errorf(errclass.Unavailable, "room directory: %v", err)
}

// ListRooms implements roomcell.v1.RoomService.
func (s *RoomServer) ListRooms(ctx context.Context, r *roomcellv1.ListRoomsRequest) (*roomcellv1.ListRoomsReply, error) {
	tok, size, filter, err := validateListRooms(r, listScopeOf(ctx))
	if err != nil {
		return nil, s.invalid(ctx, err)
	}
	if s.dir == nil {
		return nil, errNoDirectory
	}
	// A filtered page may scan up to MaxRoomsScan entries: the caller's
	// share of the app's read bucket bounds how often.
	if err := s.allow(ctx, r.GetAppCode(), callerOf(ctx), ratelimit.ReadListRooms); err != nil {
		return nil, err
	}
	dctx, cancel := s.callCtx(ctx)
	defer cancel()
	// A walk reads one snapshot of the ranking, taken at its first page:
	// heat moving underneath changes the fields shown, not the order, so
	// no room comes twice and none ranked when the walk began is left
	// out. A directory without snapshots pages the live ranking.
	read := func(pos, n int) (persistence.RoomPage, error) {
		return s.dir.ListRooms(dctx, r.GetAppCode(), pos, n)
	}
	if snaps, ok := s.dir.(persistence.RankingSnapshots); ok {
		if r.GetPageToken() == "" {
			if tok.snap, err = snaps.SnapshotRanking(dctx, r.GetAppCode(), RoomsSnapshotWindow, RoomsSnapshotTTL); err != nil {
				return nil, toStatus(ctx, s.log, directoryErr(err, "no ranking"))
			}
		}
		if tok.snap != "" {
			read = func(pos, n int) (persistence.RoomPage, error) {
				return snaps.ListSnapshot(dctx, r.GetAppCode(), tok.snap, pos, n, RoomsSnapshotTTL)
			}
		}
	}
	// The ranking is read in order from the token's position and
	// filtered here: the token is a position in the ranking, so filtered
	// pages stay in heat order and resume where the last one stopped.
	out := &roomcellv1.ListRoomsReply{}
	pos, chunk, more := tok.offset, size, true
	for scanned := 0; more && len(out.Rooms) < size && scanned < MaxRoomsScan; {
		page, err := read(pos, chunk)
		if err != nil {
			return nil, toStatus(ctx, s.log, directoryErr(err, fmt.Sprintf(
				"page_token expired (a walk's tokens last %s after its last page): list again from the first page", RoomsSnapshotTTL)))
		}
		out.Total = page.Total
		next := pos + chunk
		for _, e := range page.Rooms {
			if !filter.Match(e) {
				continue
			}
			out.Rooms = append(out.Rooms, listing(e))
			if len(out.Rooms) == size {
				next = int(e.Rank) // resume after it
				break
			}
		}
		scanned += chunk
		pos, chunk = next, roomsScanChunk
		more = int64(pos) < page.Total && (len(page.Rooms) > 0 || tok.snap != "")
	}
	if more && pos <= maxRoomsOffset {
		out.NextPageToken = roomsToken{snap: tok.snap, offset: pos}.String()
	}
	return out, nil
}

func listing(e persistence.RoomEntry) *roomcellv1.RoomListing {
	m := e.MetaOf()
	return &roomcellv1.RoomListing{
		AppCode: e.AppCode, RoomId: e.RoomID, Name: e.Name, OwnerUserId: e.OwnerUserID,
		MemberCount: e.MemberCount, Heat: e.Heat, Rank: e.Rank, UpdatedAtMs: e.UpdatedAtMs,
		Category: m.Category, Tags: append([]string(nil), m.Tags...), CoverUrl: m.CoverURL, Visibility: room.VisibilityOf(m.Visibility),
	}
}

// GetUserRoom implements roomcell.v1.RoomService.
func (s *RoomServer) GetUserRoom(ctx context.Context, r *roomcellv1.GetUserRoomRequest) (*roomcellv1.GetUserRoomReply, error) {
	if err := validateGetUserRoom(r); err != nil {
		return nil, s.invalid(ctx, err)
	}
	if s.dir == nil {
		return nil, errNoDirectory
	}
	dctx, cancel := s.callCtx(ctx)
	defer cancel()
	ur, err := s.dir.UserRoom(dctx, r.GetAppCode(), r.GetUserId())
	if err != nil {
		return nil, toStatus(ctx, s.log, directoryErr(err, fmt.Sprintf("user %s is in no room of app %s", r.GetUserId(), r.GetAppCode())))
	}
	return &roomcellv1.GetUserRoomReply{
		AppCode: ur.AppCode, UserId: ur.UserID, RoomId: ur.RoomID,
		JoinedAtMs: ur.JoinedAtMs, LastSeenMs: ur.LastSeenMs, Online: ur.Online,
	}, nil
}
