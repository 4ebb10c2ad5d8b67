package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	flag "github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
)

func init() {
	register(&command{
		name: "like-stream",
		usage: "send --times calls of --count likes each from --user over one LikeStream (command_ids <--command-id>-1, -2, ...); " +
			"a stream the server ends is opened again and the likes without an ack sent again under their ids",
		flags: func(fs *flag.FlagSet) {
			commandFlags(fs)
			fs.Int64("count", 1, "likes in each call (1 to 100)")
			fs.Int("times", 1, "calls to send on the stream")
		},
		run: runLikeStream,
	})
}

// runLikeStream sends the likes and prints each ack as it comes; it
// fails with the first refusal's code once every like is answered.
func runLikeStream(ctx context.Context, e *env, fs *flag.FlagSet) error {
	id, app, room, user := header(fs)
	count, _ := fs.GetInt64("count")
	times, _ := fs.GetInt("times")
	if times < 1 {
		return errors.New("--times must be at least 1")
	}
	owed := map[string]bool{}
	var order []string
	for i := 1; i <= times; i++ {
		c := fmt.Sprintf("%s-%d", id, i)
		owed[c] = true
		order = append(order, c)
	}
	var refused error
	for attempt := 0; len(owed) > 0; attempt++ {
		err := likeStreamOnce(ctx, e, owed, order, app, room, user, count, &refused)
		if err == nil || len(owed) == 0 {
			break
		}
		// The stream ended before every like was answered: the ones
		// without an ack go again under their command_ids (a counted one
		// is answered duplicate), on a new stream.
		switch status.Code(err) {
		case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		default:
			return rpcError(err)
		}
		select {
		case <-ctx.Done():
			return rpcError(err)
		case <-time.After(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond):
		}
	}
	return refused
}

// likeStreamOnce opens a stream and sends the likes owed; each ack
// answered is printed and taken off owed.
func likeStreamOnce(ctx context.Context, e *env, owed map[string]bool, order []string, app, room, user string, count int64, refused *error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := client(e).LikeStream(ctx)
	if err != nil {
		return err
	}
	var todo []string
	for _, c := range order {
		if owed[c] {
			todo = append(todo, c)
		}
	}
	// At most LikeStreamInFlight likes without an ack, as the server
	// reads them: after a break each is then recognised when sent again.
	slots := make(chan struct{}, grpcapi.LikeStreamInFlight)
	go func() {
		for i, c := range todo {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			m := &roomcellv1.LikeStreamRequest{CommandId: c, Count: count}
			if i == 0 { // the first names the stream's room and member
				m.AppCode, m.RoomId, m.UserId = app, room, user
			}
			if s.Send(m) != nil {
				return // the status comes from Recv
			}
		}
		_ = s.CloseSend()
	}()
	for {
		a, err := s.Recv()
		if errors.Is(err, io.EOF) {
			if len(owed) > 0 {
				return status.Error(codes.Unavailable, "the stream ended before every like was answered")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if !owed[a.GetCommandId()] {
			continue
		}
		<-slots
		delete(owed, a.GetCommandId())
		if err := e.printResult(a, func(w io.Writer) { printLikeAck(w, a) }); err != nil {
			return err
		}
		if a.GetGrpcCode() != 0 && *refused == nil {
			*refused = &rpcErr{code: codes.Code(a.GetGrpcCode()), msg: a.GetMessage(), reason: a.GetCode()}
		}
	}
}

func printLikeAck(w io.Writer, a *roomcellv1.LikeStreamAck) {
	switch {
	case a.GetGrpcCode() != 0:
		fmt.Fprintf(w, "command_id %s  refused %s %s: %s\n", a.GetCommandId(), codes.Code(a.GetGrpcCode()), a.GetCode(), a.GetMessage())
	case a.GetDuplicate():
		fmt.Fprintf(w, "command_id %s  seq %d  duplicate yes (counted before; nothing was written)\n", a.GetCommandId(), a.GetRoomSeq())
	default:
		fmt.Fprintf(w, "command_id %s  seq %d  duplicate no\n", a.GetCommandId(), a.GetRoomSeq())
	}
}
