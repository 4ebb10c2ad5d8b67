package grpcapi

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
)

// LikeStreamInFlight is how many messages of one LikeStream wait for
// their acks at most: the server reads the stream's next message only
// once one of them is answered, so a client sending faster is held by
// HTTP/2's flow control, not queued here. It is the likes of a user the
// room recognises a retry of (room.MaxLikeReceipts): a client that sends
// again every like without an ack after its stream broke (a crash, a
// move) is answered duplicate for each one the room counted, never
// counted twice. A member calling every 200 ms has about three in
// flight at the 500 ms window.
const LikeStreamInFlight = room.MaxLikeReceipts

// LikeStreamOptions bound the LikeStream streams of a server.
type LikeStreamOptions struct {
	// Max caps the streams open at once (grpc.max_like_streams); past
	// it a new one is refused with LIKE_STREAM_LIMIT.
	Max int
	// Idle ends a stream that sent no message and is owed no ack this
	// long (grpc.like_stream_idle), with OK: the client opens another
	// when its member likes again.
	Idle time.Duration
	// Metrics: nil counts nothing.
	Metrics *LikeStreamMetrics
}

// LikeStreamMetrics counts a node's like streams and their acks.
type LikeStreamMetrics struct {
	Open prometheus.Gauge
	Acks *prometheus.CounterVec // by outcome: counted, duplicate, refused
	// The outcomes' series, looked up once rather than per ack.
	counted, duplicate, refused prometheus.Counter
}

func (m *LikeStreamMetrics) ack(a *roomcellv1.LikeStreamAck) {
	switch {
	case a.GetGrpcCode() != int32(codes.OK):
		m.refused.Inc()
	case a.GetDuplicate():
		m.duplicate.Inc()
	default:
		m.counted.Inc()
	}
}

// NewLikeStreamMetrics registers the like stream metrics on reg.
func NewLikeStreamMetrics(reg prometheus.Registerer) (*LikeStreamMetrics, error) {
	m := &LikeStreamMetrics{
		Open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "roomcell_like_streams_open",
			Help: "LikeStream streams open on this node."}),
		Acks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcell_like_stream_acks_total",
			Help: "LikeStream messages answered, by outcome (counted, duplicate, refused)."}, []string{"outcome"}),
	}
	m.counted, m.duplicate, m.refused = m.Acks.WithLabelValues("counted"), m.Acks.WithLabelValues("duplicate"), m.Acks.WithLabelValues("refused")
	for _, c := range []prometheus.Collector{m.Open, m.Acks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// DefaultLikeStreamIdle is grpc.like_stream_idle when the file sets
// none, and LikeStreamOptions.Idle when it is 0.
const DefaultLikeStreamIdle = time.Minute

// SetLikeStreams serves LikeStream under o; without it LikeStream
// answers Unimplemented. Call it before serving.
func (s *RoomServer) SetLikeStreams(o LikeStreamOptions) {
	if o.Idle <= 0 {
		o.Idle = DefaultLikeStreamIdle
	}
	s.likeStreams = o
}

func init() { registerValidated(&roomcellv1.LikeStreamRequest{}) }

var errNoLikeStreams = status.Error(codes.Unimplemented, "like streams are not served by this server; call LikeRoom")

// The like streams' own refusals, declared so that every code of the
// table names an error (errclass.Lookup); answered as their rows'
// statuses (rowStatus).
var (
	errLikeStreamLimit    = errclass.New(errclass.CodeLikeStreamLimit)
	errLikeStreamMismatch = errclass.New(errclass.CodeLikeStreamMismatch)
)

// likeStreamMismatch answers a message naming another app, room or user
// than the stream's first.
var likeStreamMismatch = rowStatus(errclass.CodeLikeStreamMismatch, nil)

// LikeStream takes a member's likes over one stream: each message is the
// LikeRoom of its fields, decided by command's two halves (admit: the
// same parse, rate limit and request id as the unary call; run: the same
// room client and front; nothing here decides a like), and answered on
// the stream once its window is stored. Auth is
// the gate's, at the stream's open, before any message is read.
//
// A reader goroutine takes a slot of LikeStreamInFlight before each
// read, admits the message and starts a goroutine for it, which waits
// for the like's window and sends its ack (one at a time, sendMu) and
// gives the slot back: a message costs two channel operations and a
// goroutine beyond the unary call's own work. This goroutine only waits for the stream's end: the client's
// (its half-close, once every ack is sent), the reader's error, or idle.
func (s *RoomServer) LikeStream(stream grpc.BidiStreamingServer[roomcellv1.LikeStreamRequest, roomcellv1.LikeStreamAck]) error {
	o := s.likeStreams
	if o.Max <= 0 {
		return errNoLikeStreams
	}
	if n := s.likeStreamsOpen.Add(1); n > int64(o.Max) {
		s.likeStreamsOpen.Add(-1)
		return rowStatus(errclass.CodeLikeStreamLimit, nil).Err()
	}
	defer s.likeStreamsOpen.Add(-1)
	if o.Metrics != nil {
		o.Metrics.Open.Inc()
		defer o.Metrics.Open.Dec()
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel() // the likes in flight stop with the stream
	ls := &likeStream{s: s, stream: stream, metrics: o.Metrics, slots: make(chan struct{}, LikeStreamInFlight)}
	ls.touch()
	readEnd := make(chan error, 1)
	go func() { readEnd <- ls.read(ctx) }()
	// Idle: checked once an idle time, not per message.
	idle := time.NewTimer(o.Idle)
	defer idle.Stop()
	defer ls.finish()
	for {
		select {
		case err := <-readEnd:
			if !errors.Is(err, io.EOF) {
				// The client went away or sent a body that is no
				// message (the gate's InvalidArgument): the likes in
				// flight may still be counted; a client resends them
				// under their command_ids and is answered duplicate for
				// those.
				return err
			}
			// The client is done sending: every ack it is owed, then OK.
			for range LikeStreamInFlight {
				select {
				case ls.slots <- struct{}{}:
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				}
			}
			return nil
		case <-idle.C:
			since := time.Duration(time.Now().UnixNano() - ls.last.Load())
			switch {
			case ls.inFlight.Load() > 0:
				idle.Reset(o.Idle) // an ack is owed: not idle
			case since >= o.Idle:
				return nil
			default:
				idle.Reset(o.Idle - since)
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// likeStream is one LikeStream's state, shared by its reader and its
// likes in flight.
type likeStream struct {
	s       *RoomServer
	stream  grpc.BidiStreamingServer[roomcellv1.LikeStreamRequest, roomcellv1.LikeStreamAck]
	metrics *LikeStreamMetrics
	// slots holds a token per message read and not yet answered.
	slots    chan struct{}
	inFlight atomic.Int64
	last     atomic.Int64 // unix ns of the last message or ack
	sendMu   sync.Mutex
	ended    bool // under sendMu: the handler returned, nothing more is sent
}

func (ls *likeStream) touch() { ls.last.Store(time.Now().UnixNano()) }

// read reads the stream's messages until its end, each once a slot is
// free; the first names the stream's app, room and user.
func (ls *likeStream) read(ctx context.Context) error {
	var bound *roomcellv1.LikeStreamRequest
	for {
		select {
		case ls.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		m, err := ls.stream.Recv()
		if err != nil {
			<-ls.slots
			return err
		}
		ls.touch()
		ls.inFlight.Add(1)
		if bound == nil {
			bound = m
		}
		if !sameLiker(bound, m) {
			ls.answer(refusedAck(m.GetCommandId(), likeStreamMismatch))
			continue
		}
		// Checked and rate limited here, on a goroutine whose stack has
		// grown once (the parse's frames, on a goroutine a message, were
		// a tenth of a like's server CPU in runtime.newstack); only the
		// wait for the window gets a goroutine of its own.
		rc := likeCommand(bound, m)
		tok, err := ls.s.admit(ctx, rc)
		if err != nil {
			ls.answer(refusedAck(m.GetCommandId(), status.Convert(err)))
			continue
		}
		go ls.decide(ctx, m.GetCommandId(), rc, tok)
	}
}

// decide answers an admitted like with the room's answer. A panic
// deciding it is answered as the recovery interceptor answers a unary
// call's (Internal, logged with its stack): it happened off the
// handler's goroutine, where that interceptor cannot catch it.
func (ls *likeStream) decide(ctx context.Context, commandID string, rc *roomcellv1.RoomCommand, tok ratelimit.Token) {
	defer func() {
		if r := recover(); r != nil {
			ls.answer(refusedAck(commandID, status.Convert(panicStatus(ctx, ls.s.log, roomcellv1.RoomService_LikeStream_FullMethodName, r))))
		}
	}()
	reply, err := ls.s.run(ctx, rc, tok)
	if err != nil {
		ls.answer(refusedAck(commandID, status.Convert(err)))
		return
	}
	ls.answer(&roomcellv1.LikeStreamAck{CommandId: commandID, RoomSeq: reply.GetRoomSeq(), Duplicate: reply.GetDuplicate()})
}

// answer sends a message's ack and frees its slot.
func (ls *likeStream) answer(a *roomcellv1.LikeStreamAck) {
	if ls.metrics != nil {
		ls.metrics.ack(a)
	}
	ls.sendMu.Lock()
	if !ls.ended {
		// An error ends the stream: its reader and the handler see it.
		_ = ls.stream.Send(a)
	}
	ls.sendMu.Unlock()
	ls.touch()
	ls.inFlight.Add(-1)
	<-ls.slots
}

// finish: nothing is sent once the handler returned.
func (ls *likeStream) finish() {
	ls.sendMu.Lock()
	ls.ended = true
	ls.sendMu.Unlock()
}

// sameLiker: m is for the stream's app, room and user (an empty field
// takes the stream's).
func sameLiker(bound, m *roomcellv1.LikeStreamRequest) bool {
	same := func(b, v string) bool { return v == "" || v == b }
	return same(bound.GetAppCode(), m.GetAppCode()) && same(bound.GetRoomId(), m.GetRoomId()) && same(bound.GetUserId(), m.GetUserId())
}

// likeCommand is the LikeRoom of m under the stream's app, room and
// user.
func likeCommand(bound, m *roomcellv1.LikeStreamRequest) *roomcellv1.RoomCommand {
	return &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LikeRoom{LikeRoom: &roomcellv1.LikeRoomRequest{
		CommandId: m.GetCommandId(), RequestId: m.GetRequestId(),
		AppCode: bound.GetAppCode(), RoomId: bound.GetRoomId(), UserId: bound.GetUserId(), Count: m.GetCount()}}}
}

// refusedAck carries st as LikeRoom would have answered it: its code,
// text, stable code (the ErrorInfo reason) and retry delay.
func refusedAck(commandID string, st *status.Status) *roomcellv1.LikeStreamAck {
	// A command_id that is not UTF-8 (refused by name) cannot go back in
	// a protobuf string as it came.
	commandID = strings.ToValidUTF8(commandID, "\uFFFD")
	a := &roomcellv1.LikeStreamAck{CommandId: commandID, GrpcCode: int32(st.Code()), Message: st.Message()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == errorDomain {
				a.Code = d.GetReason()
			}
		case *errdetails.RetryInfo:
			a.RetryAfterMs = d.GetRetryDelay().AsDuration().Milliseconds()
		}
	}
	return a
}
