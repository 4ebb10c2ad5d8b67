package grpcapi

import (
	"context"
	"errors"
	"strconv"

	"github.com/hyapp/roomcell/errclass"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// The room's event log for clients (docs/client-protocol.md):
// ListRoomEvents reads it, WatchRoom follows it. Both are answered by the
// room's owner; the error details below are the protocol's resync and
// resume signals.

// RoomEvents is what ListRoomEvents and WatchRoom use; actors/roomfeed's
// Client and Watcher provide it (RoomEventsOf). A page's Wire, when set,
// is sent as its events' encoding (eventsCodec). Watch calls accepted
// once the room's owner has taken the watch, before any event.
type RoomEvents interface {
	ListEventsPage(ctx context.Context, r *roomcellv1.ListRoomEventsRequest) (roomfeed.EventsPage, error)
	Watch(ctx context.Context, app, roomID string, after int64, accepted func() error, send func(*roomcellv1.WatchRoomReply) error) error
}

// messageWatcher is a RoomEvents whose watch sends its events' kept
// encodings and, when the client asks, several room_seqs a message
// (actors/roomfeed's Watcher).
type messageWatcher interface {
	WatchMessages(ctx context.Context, app, roomID string, after int64, batch bool, accepted func() error, send func(roomfeed.Message) error) error
}

// framesWatcher is a RoomEvents whose watch hands each message as its
// events field, framed once on the node for all the room's watchers
// (actors/roomfeed's Watcher): sent as those bytes (framedWatch).
type framesWatcher interface {
	WatchFrames(ctx context.Context, app, roomID string, after int64, batch bool, accepted func() error, send func(roomfeed.Frames) error) error
}

// RoomEventsOf joins a room feed client (reads) and a node's watcher.
func RoomEventsOf(c roomfeed.Client, w *roomfeed.Watcher) RoomEvents {
	return roomEvents{c, w}
}

type roomEvents struct {
	roomfeed.Client
	*roomfeed.Watcher
}

func (e roomEvents) Watch(ctx context.Context, app, roomID string, after int64, accepted func() error, send func(*roomcellv1.WatchRoomReply) error) error {
	return e.Watcher.WatchAccepted(ctx, app, roomID, after, accepted, send)
}

// ErrorInfo reasons of the event log (domain "roomcell"), rows of
// errclass's table (docs/errors.md).
var (
	ErrorDomain = errorDomain
	// ReasonEventsTrimmed (OUT_OF_RANGE): the events after after_room_seq
	// are past retention; metadata oldest_after_seq, head_seq.
	ReasonEventsTrimmed = errclass.CodeRoomEventsTrimmed.String()
	// ReasonWatchEnded (UNAVAILABLE): the room moved, the owner stopped
	// answering or the node drains; metadata resume_after_seq, cause.
	ReasonWatchEnded = errclass.CodeRoomWatchEnded.String()
	// ReasonWatchCut (RESOURCE_EXHAUSTED): the reader fell a whole buffer
	// behind; metadata resume_after_seq.
	ReasonWatchCut = errclass.CodeRoomWatchCut.String()
	// ReasonWatchLimit (RESOURCE_EXHAUSTED): the node serves its
	// grpc.max_watch_streams; try another node.
	ReasonWatchLimit = errclass.CodeRoomWatchLimit.String()
)

// errWatchLimit is the error of ROOM_WATCH_LIMIT, declared so that every
// code of the table names an error (errclass.Lookup); WatchRoom answers
// it as its row's status (rowStatus).
var errWatchLimit = errclass.New(errclass.CodeRoomWatchLimit)

// SetEvents gives the server the event log; maxStreams caps the
// WatchRoom streams open at once on this server (0: none allowed). Call
// it before serving; without it both RPCs answer Unimplemented.
func (s *RoomServer) SetEvents(e RoomEvents, maxStreams int) {
	s.events, s.maxWatch = e, int64(maxStreams)
}

func init() {
	registerValidated(&roomcellv1.ListRoomEventsRequest{}, &roomcellv1.WatchRoomRequest{})
}

var errNoEvents = status.Error(codes.Unimplemented, "the room event log is not served by this server")

func checkEventsRequest(requestID, app, roomID string, after int64) error {
	if err := room.CheckID("app_code", app); err != nil {
		return err
	}
	if err := room.CheckID("room_id", roomID); err != nil {
		return err
	}
	if err := checkOptionalID("request_id", requestID); err != nil {
		return err
	}
	if after < 0 {
		return errclass.Invalidf("after_room_seq must be 0 or more, got %d", after)
	}
	return nil
}

func (s *RoomServer) ListRoomEvents(ctx context.Context, r *roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) {
	p, err := s.listRoomEvents(ctx, r)
	return p.Reply, err
}

// listRoomEvents is ListRoomEvents with the events' encodings, when the
// room had them (RegisterRoomService sends them).
func (s *RoomServer) listRoomEvents(ctx context.Context, r *roomcellv1.ListRoomEventsRequest) (roomfeed.EventsPage, error) {
	if s.events == nil {
		return roomfeed.EventsPage{}, errNoEvents
	}
	if err := checkEventsRequest(r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetAfterRoomSeq()); err != nil {
		return roomfeed.EventsPage{}, s.invalid(ctx, err)
	}
	if l := r.GetLimit(); l < 0 || l > roomfeed.MaxEventsLimit {
		return roomfeed.EventsPage{}, s.invalid(ctx, errclass.Invalidf("limit must be between 0 (default %d) and %d, got %d", roomfeed.DefaultEventsLimit, roomfeed.MaxEventsLimit, l))
	}
	setRequestID(ctx, r)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	p, err := s.events.ListEventsPage(cctx, r)
	if err != nil {
		return roomfeed.EventsPage{}, s.eventsStatus(cctx, err)
	}
	return p, nil
}

func (s *RoomServer) WatchRoom(r *roomcellv1.WatchRoomRequest, stream grpc.ServerStreamingServer[roomcellv1.WatchRoomReply]) error {
	ctx := stream.Context()
	if s.events == nil {
		return errNoEvents
	}
	if err := checkEventsRequest(r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetAfterRoomSeq()); err != nil {
		return s.invalid(ctx, err)
	}
	if n := s.watching.Add(1); n > s.maxWatch {
		s.watching.Add(-1)
		return rowStatus(errclass.CodeRoomWatchLimit, nil).Err()
	}
	defer s.watching.Add(-1)
	// The header goes out once the owner has taken the watch: a client
	// of an idle room tells "accepted, nothing happened yet" from a node
	// that does not answer without waiting for the first event or for
	// keepalive.
	accepted := func() error { return stream.SendHeader(metadata.MD{}) }
	var err error
	if fw, ok := s.events.(framesWatcher); ok {
		// Each message is its seq and the events as the node framed
		// them once for every watcher (eventscodec.go): nothing is
		// copied or encoded per watcher before gRPC writes it.
		err = fw.WatchFrames(ctx, r.GetAppCode(), r.GetRoomId(), r.GetAfterRoomSeq(), r.GetBatch(), accepted, func(m roomfeed.Frames) error {
			return stream.SendMsg(&framedWatch{m})
		})
	} else if mw, ok := s.events.(messageWatcher); ok {
		// Each message from its events' kept encodings (eventsCodec),
		// several room_seqs a message when the client asked for batches.
		err = mw.WatchMessages(ctx, r.GetAppCode(), r.GetRoomId(), r.GetAfterRoomSeq(), r.GetBatch(), accepted, func(m roomfeed.Message) error {
			return stream.SendMsg(watchReply(m))
		})
	} else {
		err = s.events.Watch(ctx, r.GetAppCode(), r.GetRoomId(), r.GetAfterRoomSeq(), accepted, stream.Send)
	}
	if err == nil || ctx.Err() != nil {
		return nil // the client went away
	}
	return s.eventsStatus(ctx, err)
}

// eventsStatus is toStatus with the event log's own signals.
func (s *RoomServer) eventsStatus(ctx context.Context, err error) error {
	var te *roomfeed.TrimmedError
	var we *roomfeed.WatchEndedError
	switch {
	case errors.As(err, &te):
		return rowStatus(errclass.CodeRoomEventsTrimmed, map[string]string{
			"after_room_seq":   strconv.FormatInt(te.After, 10),
			"oldest_after_seq": strconv.FormatInt(te.OldestAfterSeq, 10),
			"head_seq":         strconv.FormatInt(te.HeadSeq, 10),
		}).Err()
	case errors.As(err, &we):
		code := errclass.CodeRoomWatchEnded
		if we.Cut {
			code = errclass.CodeRoomWatchCut
		}
		return rowStatus(code, map[string]string{
			"resume_after_seq": strconv.FormatInt(we.ResumeAfter, 10),
			"cause":            we.Reason,
		}, we.Reason).Err()
	}
	return toStatus(ctx, s.log, err)
}

// ResumeAfterSeq reads the seq to resume a watch after from a status of
// WatchRoom (ok false: the status carries none).
func ResumeAfterSeq(err error) (int64, bool) {
	return errorInfoSeq(err, "resume_after_seq", ReasonWatchEnded, ReasonWatchCut)
}

// TrimmedHead reads head_seq from an OUT_OF_RANGE of the event log (ok
// false: err is not one).
func TrimmedHead(err error) (int64, bool) {
	return errorInfoSeq(err, "head_seq", ReasonEventsTrimmed)
}

func errorInfoSeq(err error, key string, reasons ...string) (int64, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != ErrorDomain {
			continue
		}
		for _, r := range reasons {
			if info.Reason == r {
				n, err := strconv.ParseInt(info.Metadata[key], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
