package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
)

// logEvents is a room of head commands, one event each, whose watch
// streams end (room moved) every `cut` messages.
type logEvents struct {
	head, trimmedBelow int64
	cut                int
	streams            atomic.Int64
}

func (l *logEvents) event(seq int64) *roomcellv1.RoomLogEvent {
	return &roomcellv1.RoomLogEvent{RoomSeq: seq, EventId: fmt.Sprintf("a:r:%d:0", seq), EventType: "RoomUserJoined", Payload: `{}`, CommandId: fmt.Sprint("c", seq)}
}

func (l *logEvents) ListEventsPage(_ context.Context, r *roomcellv1.ListRoomEventsRequest) (roomfeed.EventsPage, error) {
	if r.AfterRoomSeq < l.trimmedBelow {
		return roomfeed.EventsPage{}, &roomfeed.TrimmedError{After: r.AfterRoomSeq, OldestAfterSeq: l.trimmedBelow, HeadSeq: l.head}
	}
	reply := &roomcellv1.ListRoomEventsReply{NextAfterSeq: r.AfterRoomSeq, HeadSeq: l.head}
	for s := r.AfterRoomSeq + 1; s <= l.head && len(reply.Events) < int(r.Limit); s++ {
		reply.Events = append(reply.Events, l.event(s))
		reply.NextAfterSeq = s
	}
	return roomfeed.EventsPage{Reply: reply}, nil
}

func (l *logEvents) Watch(ctx context.Context, _, _ string, after int64, accepted func() error, send func(*roomcellv1.WatchRoomReply) error) error {
	l.streams.Add(1)
	if err := accepted(); err != nil {
		return err
	}
	for s, n := after+1, 0; s <= l.head; s, n = s+1, n+1 {
		if n == l.cut {
			return &roomfeed.WatchEndedError{ResumeAfter: s - 1, Reason: roomfeed.EndMoved}
		}
		if err := send(&roomcellv1.WatchRoomReply{RoomSeq: s, Events: []*roomcellv1.RoomLogEvent{l.event(s)}}); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

func startEventsTestServer(t *testing.T, l *logEvents) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log})
	rs := grpcapi.NewRoomServer(&roomTestBackend{}, log, 0)
	rs.SetEvents(l, 10)
	roomcellv1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func seqLines(out string) []string {
	var seqs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "seq ") {
			seqs = append(seqs, strings.Fields(line)[1])
		}
	}
	return seqs
}

func TestRoomctlEventsPagesToTheHead(t *testing.T) {
	addr := startEventsTestServer(t, &logEvents{head: 25, trimmedBelow: 3})
	code, out, errOut := runCtl(t, addr, "events", "--app", "a", "--room", "r", "--after", "4", "--limit", "7", "--all")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := strings.Join(seqLines(out), ","); got != "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25" {
		t.Fatalf("seqs %s\n%s", got, out)
	}
	if !strings.Contains(out, "next_after_seq 25  head_seq 25") {
		t.Fatalf("no head line:\n%s", out)
	}
	code, _, errOut = runCtl(t, addr, "events", "--app", "a", "--room", "r", "--after", "1")
	if code != 1 || !strings.Contains(errOut, "OutOfRange") || !strings.Contains(errOut, "the head was 25") {
		t.Fatalf("trimmed: exit %d: %s", code, errOut)
	}
}

// watch resumes each time the server ends the stream, printing every
// seq once, in order.
func TestRoomctlWatchResumesWithoutRepeats(t *testing.T) {
	l := &logEvents{head: 12, cut: 5}
	addr := startEventsTestServer(t, l)
	code, out, errOut := runCtl(t, addr, "watch", "--app", "a", "--room", "r", "--after", "2", "--for", "3s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := strings.Join(seqLines(out), ","); got != "3,4,5,6,7,8,9,10,11,12" {
		t.Fatalf("seqs %s\n%s", got, out)
	}
	if n := strings.Count(out, "# stream ended"); n != 1 || l.streams.Load() != 2 {
		t.Fatalf("%d ends printed, %d streams:\n%s", n, l.streams.Load(), out)
	}
	code, _, errOut = runCtl(t, addr, "watch", "--app", "a", "--room", "r", "--resume=false")
	if code != 1 || !strings.Contains(errOut, "resume with --after 5") {
		t.Fatalf("without resume: exit %d: %s", code, errOut)
	}
}
