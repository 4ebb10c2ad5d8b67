package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	flag "github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
)

// The room's event log: `events` reads it (ListRoomEvents), `watch`
// follows it (WatchRoom), resuming as docs/client-protocol.md says.

func init() {
	register(&command{
		name:  "events",
		usage: "list a room's events after --after (ListRoomEvents); --all follows pages to the head",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.Int64("after", 0, "after_room_seq: list the events after this seq")
			fs.Int32("limit", 0, "events per page (0 = server default 100; at most 1000)")
			fs.Bool("all", false, "read page after page up to the room's head")
		},
		run: runEvents,
	})
	register(&command{
		name:  "watch",
		usage: "stream a room's events after --after, then live ones (WatchRoom); resumes when the server ends the stream",
		flags: func(fs *flag.FlagSet) {
			roomFlags(fs)
			fs.Int64("after", 0, "after_room_seq: stream the events after this seq")
			fs.Duration("for", 0, "stop after this long (0 = until interrupted; the global --timeout does not apply)")
			fs.Bool("resume", true, "watch again from the resume seq when the server ends the stream (room moved, node draining, reader cut)")
		},
		run: runWatch,
	})
}

func printEvent(w io.Writer, e *roomcellv1.RoomLogEvent) {
	fmt.Fprintf(w, "seq %d  %s  %s  command_id %s  %s\n", e.RoomSeq, e.EventType, e.EventId, e.CommandId, e.Payload)
}

func runEvents(ctx context.Context, e *env, fs *flag.FlagSet) error {
	r := &roomcellv1.ListRoomEventsRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"), AfterRoomSeq: i64(fs, "after"), Limit: i32(fs, "limit")}
	all, _ := fs.GetBool("all")
	for {
		reply, err := client(e).ListRoomEvents(ctx, r)
		if err != nil {
			if head, ok := grpcapi.TrimmedHead(err); ok {
				return fmt.Errorf("%w (resync: roomctl get, then roomctl events --after <its seq>; the head was %d)", rpcError(err), head)
			}
			return rpcError(err)
		}
		if err := e.printResult(reply, func(w io.Writer) {
			for _, ev := range reply.Events {
				printEvent(w, ev)
			}
			fmt.Fprintf(w, "next_after_seq %d  head_seq %d\n", reply.NextAfterSeq, reply.HeadSeq)
		}); err != nil {
			return err
		}
		if !all || reply.NextAfterSeq >= reply.HeadSeq || reply.NextAfterSeq <= r.AfterRoomSeq {
			return nil
		}
		r.AfterRoomSeq = reply.NextAfterSeq
	}
}

func runWatch(ctx context.Context, e *env, fs *flag.FlagSet) error {
	// A watch outlives the global --timeout: --for and an interrupt end it.
	ctx = context.WithoutCancel(ctx)
	if d, _ := fs.GetDuration("for"); d > 0 {
		// A timer, not a deadline: a deadline travels to the server as
		// grpc-timeout, which can end the stream with DeadlineExceeded
		// a moment before this side's context reports it is done.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer time.AfterFunc(d, cancel).Stop()
		defer cancel()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	resume, _ := fs.GetBool("resume")
	r := &roomcellv1.WatchRoomRequest{AppCode: str(fs, "app"), RoomId: str(fs, "room"), AfterRoomSeq: i64(fs, "after")}
	backoff := 100 * time.Millisecond
	for {
		err := watchOnce(ctx, e, r)
		if ctx.Err() != nil {
			return nil // --for elapsed or interrupted
		}
		after, ok := grpcapi.ResumeAfterSeq(err)
		switch {
		case !ok && status.Code(err) == codes.Unavailable:
			after, ok = r.AfterRoomSeq, true // the connection broke: resume from what was printed
		case !ok:
			if head, trimmed := grpcapi.TrimmedHead(err); trimmed {
				return fmt.Errorf("%w (resync: roomctl get, then roomctl watch --after <its seq>; the head was %d)", rpcError(err), head)
			}
			return rpcError(err)
		}
		if !resume {
			return fmt.Errorf("%w (resume with --after %d)", rpcError(err), after)
		}
		if !e.json {
			fmt.Fprintf(e.out, "# stream ended (%s); resuming after seq %d\n", rpcError(err), after)
		}
		r.AfterRoomSeq = after
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// watchOnce runs one stream, moving r.AfterRoomSeq past every message
// printed; it returns the stream's end.
func watchOnce(ctx context.Context, e *env, r *roomcellv1.WatchRoomRequest) error {
	s, err := client(e).WatchRoom(ctx, r)
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Unavailable, "stream closed by the server")
			}
			return err
		}
		if m.RoomSeq <= r.AfterRoomSeq {
			continue // never printed twice, whatever the server sends
		}
		if err := e.printResult(m, func(w io.Writer) {
			for _, ev := range m.Events {
				printEvent(w, ev)
			}
		}); err != nil {
			return err
		}
		r.AfterRoomSeq = m.RoomSeq
	}
}
