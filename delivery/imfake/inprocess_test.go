package imfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// outcome is what a client call returned, comparable across transports.
type outcome struct {
	Seq        uint64
	Code       int
	HTTPStatus int
	Class      tencentim.Class
	Retryable  bool
	Failed     bool
}

func outcomeOf(res tencentim.GroupSendResult, err error) outcome {
	o := outcome{Seq: res.MsgSeq, Failed: err != nil}
	var te *tencentim.Error
	if errors.As(err, &te) {
		o.Code, o.HTTPStatus, o.Class, o.Retryable = te.Code, te.HTTPStatus, te.Class, te.Retryable
	}
	return o
}

// script runs the same calls, faults included, against a fresh fake with
// the client on the given transport (nil: loopback HTTP), and returns
// what each call returned and what the fake recorded.
func script(t *testing.T, inProcess bool) ([]outcome, []string) {
	t.Helper()
	s := start(t)
	var opts []tencentim.Option
	if inProcess {
		opts = append(opts, tencentim.WithHTTPClient(&http.Client{Transport: s.Transport()}))
	}
	c, err := tencentim.New(s.ClientConfig(), append(opts, tencentim.WithLogger(quiet))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.CreateGroup(ctx, tencentim.Group{GroupID: "g1", Name: "g1"}); err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, random uint32) outcome {
		return outcomeOf(c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "g1", Random: random,
			Elem:            tencentim.CustomElem{Data: fmt.Sprintf(`{"event_id":"e%d"}`, random), Ext: "room_event"},
			CloudCustomData: fmt.Sprintf(`{"event_id":"e%d"}`, random)}))
	}
	var out []outcome
	out = append(out, send(ctx, 1), send(ctx, 2), send(ctx, 1)) // the repeat is deduplicated
	s.FailNext(1, 20004)
	out = append(out, send(ctx, 3), send(ctx, 3))
	s.SetHTTPStatus(502)
	out = append(out, send(ctx, 4))
	s.ResetFaults()
	s.Delay(400 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	out = append(out, send(short, 5))
	cancel()
	s.ResetFaults()
	out = append(out, send(ctx, 6))
	var ids []string
	for _, m := range s.Messages() {
		ids = append(ids, m.EventIDs...)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out = append(out, send(ctx, 7)) // after Close: refused, retryable
	return out, ids
}

// The in-process transport answers every call, faults and all, as the
// loopback server does: same results, same error classes, same messages
// recorded.
func TestTransportServesLikeLoopback(t *testing.T) {
	loop, loopIDs := script(t, false)
	inp, inpIDs := script(t, true)
	if !reflect.DeepEqual(loop, inp) {
		t.Fatalf("outcomes differ:\nloopback   %+v\nin-process %+v", loop, inp)
	}
	if !reflect.DeepEqual(loopIDs, inpIDs) {
		t.Fatalf("recorded events differ: loopback %v, in-process %v", loopIDs, inpIDs)
	}
	// The script itself must have exercised each outcome.
	if inp[0].Failed || inp[1].Failed || inp[3].Code != 20004 || inp[4].Failed ||
		inp[5].HTTPStatus != 502 || !inp[6].Failed || inp[7].Failed || !inp[8].Failed || !inp[8].Retryable {
		t.Fatalf("outcomes %+v", inp)
	}
}

// A request for another host is refused, not served by the fake.
func TestTransportServesOnlyItsFake(t *testing.T) {
	s := start(t)
	req, _ := http.NewRequest(http.MethodPost, "http://example.com/v4/"+tencentim.APIAccountImport, nil)
	if _, err := s.Transport().RoundTrip(req); err == nil {
		t.Fatal("served a request for another host")
	}
	if calls := s.Calls(); len(calls) != 0 {
		t.Fatalf("the fake recorded %d calls", len(calls))
	}
}
