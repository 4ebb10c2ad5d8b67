package tencentim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

var quiet = slog.New(slog.DiscardHandler)

// clock is a settable time source shared by a client and a fake.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func startFake(t *testing.T, opts ...imfake.Option) *imfake.Server {
	t.Helper()
	srv, err := imfake.Start("127.0.0.1:0", append([]imfake.Option{imfake.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func newClient(t *testing.T, cfg configs.TencentIMConfig, opts ...tencentim.Option) *tencentim.Client {
	t.Helper()
	c, err := tencentim.New(cfg, append([]tencentim.Option{tencentim.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pair is a fake and a client aimed at it; mod edits the client config.
func pair(t *testing.T, mod func(*configs.TencentIMConfig), opts ...tencentim.Option) (*imfake.Server, *tencentim.Client) {
	srv := startFake(t)
	cfg := srv.ClientConfig()
	if mod != nil {
		mod(&cfg)
	}
	return srv, newClient(t, cfg, opts...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestUserSigAccepted(t *testing.T) {
	srv, c := pair(t, nil)
	if err := c.ImportAccount(ctxT(t), "u_1", "nick"); err != nil {
		t.Fatalf("ImportAccount: %v", err)
	}
	calls := srv.Calls()
	if len(calls) != 1 || calls[0].Code != 0 || calls[0].API != tencentim.APIAccountImport || calls[0].SigIssuedAt.IsZero() {
		t.Fatalf("calls = %+v", calls)
	}
	if !srv.HasAccount("u_1") {
		t.Fatal("account not imported at the fake")
	}
}

func TestWrongSecretIsPermanentAuthError(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.SecretKey = "not-the-secret" })
	err := c.ImportAccount(ctxT(t), "u_1", "")
	if !errors.Is(err, tencentim.ErrPermanent) || errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("err = %v, want permanent", err)
	}
	if tencentim.ClassOf(err) != tencentim.ClassAuth || tencentim.CodeOf(err) != 70009 {
		t.Fatalf("class %s code %d, want auth 70009", tencentim.ClassOf(err), tencentim.CodeOf(err))
	}
	if n := srv.CallCount(""); n != 1 {
		t.Fatalf("%d calls; a wrong key must not be retried", n)
	}
}

func TestUserSigRenewedAtHalfLife(t *testing.T) {
	clk := &clock{t: time.Now()}
	srv := startFake(t, imfake.WithClock(clk.Now))
	cfg := srv.ClientConfig()
	cfg.UserSigTTL = time.Hour
	c := newClient(t, cfg, tencentim.WithClock(clk.Now))
	ctx := ctxT(t)

	for i, step := range []time.Duration{0, 10 * time.Minute, 25 * time.Minute, 3 * time.Hour} {
		clk.Add(step)
		if err := c.ImportAccount(ctx, fmt.Sprintf("u_%d", i), ""); err != nil {
			t.Fatalf("call %d after +%v: %v", i, step, err)
		}
	}
	calls := srv.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4 (no retries needed)", len(calls))
	}
	// +10m reuses the sig; +35m total is past half-life: new sig; +3h35m
	// is past the first sig's expiry: new sig again, and accepted.
	if !calls[1].SigIssuedAt.Equal(calls[0].SigIssuedAt) {
		t.Errorf("sig renewed before half-life: %v vs %v", calls[1].SigIssuedAt, calls[0].SigIssuedAt)
	}
	if !calls[2].SigIssuedAt.After(calls[1].SigIssuedAt) || !calls[3].SigIssuedAt.After(calls[2].SigIssuedAt) {
		t.Errorf("sig not renewed: %v %v %v", calls[1].SigIssuedAt, calls[2].SigIssuedAt, calls[3].SigIssuedAt)
	}
}

func TestExpiredSigRegeneratedAndRetriedOnce(t *testing.T) {
	srv, c := pair(t, nil)
	srv.FailNext(1, 70001)
	if err := c.ImportAccount(ctxT(t), "u_1", ""); err != nil {
		t.Fatalf("70001 once then OK: %v", err)
	}
	calls := srv.Calls()
	if len(calls) != 2 || calls[0].Code != 70001 || calls[1].Code != 0 {
		t.Fatalf("calls = %+v, want 70001 then OK", calls)
	}

	// A client clock two hours behind issues sigs the fake sees as expired;
	// a fresh sig cannot cure that, so after one retry it is permanent.
	cfg := srv.ClientConfig()
	cfg.UserSigTTL = time.Hour
	skewed := newClient(t, cfg, tencentim.WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	srv.ClearRecords()
	err := skewed.ImportAccount(ctxT(t), "u_2", "")
	if tencentim.CodeOf(err) != 70001 || !errors.Is(err, tencentim.ErrPermanent) {
		t.Fatalf("skewed clock: %v, want permanent 70001", err)
	}
	if n := srv.CallCount(""); n != 2 {
		t.Fatalf("skewed clock: %d calls, want exactly one retry", n)
	}
}

func TestErrorClassesFromFake(t *testing.T) {
	tests := []struct {
		code        int
		class       tencentim.Class
		retryable   bool
		rateLimited bool
	}{
		{20004, tencentim.ClassTransient, true, false},
		{10002, tencentim.ClassTransient, true, false},
		{90994, tencentim.ClassTransient, true, false},
		{60007, tencentim.ClassRateLimited, true, true},
		{60008, tencentim.ClassAmbiguous, true, false},
		{80001, tencentim.ClassContent, false, false},
		{60021, tencentim.ClassAppState, false, false},
		{10004, tencentim.ClassBadRequest, false, false},
		{99999, tencentim.ClassUnknown, true, false},
	}
	srv, c := pair(t, nil)
	ctx := ctxT(t)
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv.FailNext(1, tc.code, tencentim.APIAccountImport)
			err := c.ImportAccount(ctx, "u_cls", "")
			if tencentim.CodeOf(err) != tc.code || tencentim.ClassOf(err) != tc.class {
				t.Fatalf("err = %v, want code %d class %s", err, tc.code, tc.class)
			}
			if errors.Is(err, tencentim.ErrRetryable) != tc.retryable || errors.Is(err, tencentim.ErrPermanent) == tc.retryable {
				t.Fatalf("retryable = %v, want %v", errors.Is(err, tencentim.ErrRetryable), tc.retryable)
			}
			if errors.Is(err, tencentim.ErrRateLimited) != tc.rateLimited {
				t.Fatalf("rate limited = %v, want %v", errors.Is(err, tencentim.ErrRateLimited), tc.rateLimited)
			}
			// The next call goes through: the fault was for one call.
			if err := c.ImportAccount(ctx, "u_cls", ""); err != nil {
				t.Fatalf("after the fault: %v", err)
			}
		})
	}
}

func TestGatewayStatusIsRetryable(t *testing.T) {
	srv, c := pair(t, nil)
	srv.SetHTTPStatus(http.StatusBadGateway)
	err := c.ImportAccount(ctxT(t), "u_1", "")
	var e *tencentim.Error
	if !errors.As(err, &e) || e.HTTPStatus != 502 || !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("502: %v", err)
	}
	srv.SetHTTPStatus(0)
	if err := c.ImportAccount(ctxT(t), "u_1", ""); err != nil {
		t.Fatal(err)
	}
}

func TestGroupRateErrorsAreRateLimited(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 1000; c.RatePerSecond = 1000 })
	ctx := ctxT(t)
	if err := c.CreateGroup(ctx, tencentim.Group{GroupID: "g1", Name: "g1"}); err != nil {
		t.Fatal(err)
	}
	// Tencent's two ways of refusing a hot group: MsgDropReason with code
	// 0, and 10023.
	srv.DropNext(1)
	_, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "g1", Random: 1, Elem: tencentim.CustomElem{Data: "{}"}})
	if !errors.Is(err, tencentim.ErrRateLimited) || !errors.Is(err, tencentim.ErrRetryable) || tencentim.CodeOf(err) != 0 {
		t.Fatalf("MsgDropReason: %v", err)
	}
	srv.SetGroupRateLimit(3)
	var limited int
	for i := range 6 {
		_, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "g1", Random: uint32(100 + i), Elem: tencentim.CustomElem{Data: "{}"}})
		if err != nil {
			if tencentim.CodeOf(err) != 10023 || !errors.Is(err, tencentim.ErrRateLimited) {
				t.Fatalf("send %d: %v", i, err)
			}
			limited++
		}
	}
	if limited < 3 {
		t.Fatalf("%d of 6 refused with the fake at 3/s and the client at 1000/s", limited)
	}
	if n := len(srv.GroupMessages("g1")); n != 6-limited {
		t.Fatalf("%d messages recorded, want %d", n, 6-limited)
	}
}

func TestSendC2CImportsThenRetriesMissingAccount(t *testing.T) {
	srv, c := pair(t, nil)
	ctx := ctxT(t)
	msg := func(id string) tencentim.C2CMessage {
		seq, rnd := tencentim.EventRandoms(id)
		return tencentim.C2CMessage{ToAccount: "u_9", MsgSeq: seq, MsgRandom: rnd,
			Elem: tencentim.CustomElem{Data: `{"event_id":"` + id + `"}`, Ext: "wallet_notice"}}
	}
	if _, err := c.SendC2C(ctx, msg("e1")); err != nil {
		t.Fatalf("first C2C: %v", err)
	}
	if !srv.HasAccount("u_9") || srv.CallCount(tencentim.APIAccountImport) != 1 {
		t.Fatal("receiver not imported before the first send")
	}
	if _, err := c.SendC2C(ctx, msg("e2")); err != nil {
		t.Fatal(err)
	}
	if n := srv.CallCount(tencentim.APIAccountImport); n != 1 {
		t.Fatalf("%d imports; an imported account must be cached", n)
	}

	// Deleted on Tencent's side: 90012, import, one retry.
	srv.ForgetAccount("u_9")
	if _, err := c.SendC2C(ctx, msg("e3")); err != nil {
		t.Fatalf("after the account vanished: %v", err)
	}
	if n := srv.CallCount(tencentim.APIAccountImport); n != 2 {
		t.Fatalf("%d imports, want 2", n)
	}
	var codes []int
	for _, call := range srv.Calls() {
		if call.API == tencentim.APISendMsg {
			codes = append(codes, call.Code)
		}
	}
	if fmt.Sprint(codes) != "[0 0 90012 0]" {
		t.Fatalf("sendmsg codes = %v", codes)
	}
	if n := len(srv.C2CMessages("u_9")); n != 3 {
		t.Fatalf("%d messages to u_9, want 3", n)
	}

	// Still missing after the import (the fake keeps answering 20003):
	// one retry only, then the account-missing error.
	srv.FailNext(2, 20003, tencentim.APISendMsg)
	_, err := c.SendC2C(ctx, msg("e4"))
	if tencentim.ClassOf(err) != tencentim.ClassAccountMissing || !errors.Is(err, tencentim.ErrPermanent) {
		t.Fatalf("persistent 20003: %v", err)
	}
}

func TestC2CRetryDedupedByTencent(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.Timeout = 300 * time.Millisecond })
	ctx := ctxT(t)
	if err := c.ImportAccount(ctx, "u_1", ""); err != nil {
		t.Fatal(err)
	}
	seq, rnd := tencentim.EventRandoms("evt-1")
	m := tencentim.C2CMessage{ToAccount: "u_1", MsgSeq: seq, MsgRandom: rnd, Elem: tencentim.CustomElem{Data: "x"},
		CloudCustomData: `{"event_id":"evt-1"}`}

	// Slow Tencent: the message is applied but the answer comes after the
	// client's deadline. The retry carries the same MsgSeq/MsgRandom and
	// body, so Tencent drops it.
	srv.Delay(time.Second)
	start := time.Now()
	_, err := c.SendC2C(ctx, m)
	if !errors.Is(err, tencentim.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow answer: %v, want a retryable deadline error", err)
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Fatalf("call took %v; the 300ms timeout was not honoured", el)
	}
	srv.Delay(0)
	if _, err := c.SendC2C(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := srv.EventIDCounts()["evt-1"]; got != 1 || srv.Duplicates() != 1 {
		t.Fatalf("evt-1 delivered %d times, %d duplicates; want 1 and 1", got, srv.Duplicates())
	}
}

func TestCallerContextBoundsTheCall(t *testing.T) {
	srv, c := pair(t, nil) // client timeout 4s
	srv.Delay(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.ImportAccount(ctx, "u_1", "")
	if !errors.Is(err, tencentim.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

func TestGroupLifecycleIdempotent(t *testing.T) {
	srv, c := pair(t, nil)
	ctx := ctxT(t)
	g := tencentim.Group{GroupID: "lalu_r1", Name: "Room 1", OwnerAccount: "host_1"}
	for i := range 2 {
		if err := c.CreateGroup(ctx, g); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	info, ok := srv.Group("lalu_r1")
	if !ok || info.Type != "AVChatRoom" || info.Owner != "host_1" || !srv.HasAccount("host_1") {
		t.Fatalf("group = %+v, %v (owner must be imported first)", info, ok)
	}
	var createCodes []int
	for _, call := range srv.Calls() {
		if call.API == tencentim.APICreateGroup {
			createCodes = append(createCodes, call.Code)
		}
	}
	if len(createCodes) != 2 || createCodes[0] != 0 || (createCodes[1] != 10025 && createCodes[1] != 10021) {
		t.Fatalf("create codes = %v, want [0 10021|10025]", createCodes)
	}

	// AVChatRoom has no server-side members: 10004 is surfaced; roomim
	// decides it means done.
	err := c.DeleteGroupMember(ctx, "lalu_r1", []string{"u_1"}, "kicked")
	if tencentim.CodeOf(err) != 10004 || !errors.Is(err, tencentim.ErrPermanent) {
		t.Fatalf("delete member on AVChatRoom: %v", err)
	}
	if _, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "nope", Random: 1, Elem: tencentim.CustomElem{Data: "{}"}}); tencentim.ClassOf(err) != tencentim.ClassGroupMissing {
		t.Fatalf("send to a missing group: %v", err)
	}
	for i := range 2 {
		if err := c.DestroyGroup(ctx, "lalu_r1"); err != nil {
			t.Fatalf("destroy %d: %v", i, err)
		}
	}
	if _, ok := srv.Group("lalu_r1"); ok {
		t.Fatal("group still there")
	}
}

func TestDeleteMemberOnPublicGroup(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.GroupType = "Public" })
	ctx := ctxT(t)
	if err := c.CreateGroup(ctx, tencentim.Group{GroupID: "pub", Name: "pub"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddGroupMember("pub", "u_1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroupMember(ctx, "pub", []string{"u_1", "never_member"}, "kicked"); err != nil {
		t.Fatal(err)
	}
	if info, _ := srv.Group("pub"); len(info.Members) != 0 {
		t.Fatalf("members left: %v", info.Members)
	}
}

// spread returns the first-to-last arrival span and the largest number of
// arrivals inside any one-second window.
func spread(calls []imfake.Call) (time.Duration, int) {
	times := make([]time.Time, len(calls))
	for i, c := range calls {
		times[i] = c.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	most := 0
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return times[len(times)-1].Sub(times[0]), most
}

func TestRateLimitPerAPIHonoured(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.RatePerSecond = 50 })
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() { errs <- c.ImportAccount(ctx, fmt.Sprintf("u_%d", i), "") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	span, most := spread(srv.Calls())
	// 100 calls at 50/s with a burst of one: 99 gaps of 20 ms.
	if span < 1900*time.Millisecond {
		t.Fatalf("100 calls at 50/s arrived within %v", span)
	}
	if most > 53 { // arrival jitter on a loaded machine, nothing more
		t.Fatalf("%d calls in one second at a 50/s limit", most)
	}
}

func TestRateLimitPerGroupHonoured(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 20; c.RatePerSecond = 1000 })
	ctx := ctxT(t)
	for _, g := range []string{"hot", "calm"} {
		if err := c.CreateGroup(ctx, tencentim.Group{GroupID: g, Name: g}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			if _, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "hot", Random: uint32(i), Elem: tencentim.CustomElem{Data: "{}"}}); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if _, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "calm", Random: 1, Elem: tencentim.CustomElem{Data: "{}"}}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("a calm group waited %v behind a hot one", el)
	}
	wg.Wait()
	var hot []imfake.Call
	for _, m := range srv.GroupMessages("hot") {
		hot = append(hot, imfake.Call{At: m.At})
	}
	if len(hot) != 30 {
		t.Fatalf("%d hot messages, want 30", len(hot))
	}
	span, most := spread(hot)
	if span < 1400*time.Millisecond || most > 23 {
		t.Fatalf("30 messages at 20/s: span %v, %d in one second", span, most)
	}
}

func TestRateLimitWaitBoundedByContext(t *testing.T) {
	_, c := pair(t, func(c *configs.TencentIMConfig) { c.RatePerSecond = 1 })
	ctx := ctxT(t)
	if err := c.ImportAccount(ctx, "u_1", ""); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.ImportAccount(short, "u_2", "")
	if !errors.Is(err, tencentim.ErrRateLimited) || !errors.Is(err, tencentim.ErrRetryable) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("wait beyond the deadline: %v after %v", err, time.Since(start))
	}
}

// TestNoSecretInErrors drives every failure path, including a server that
// echoes the query string back, and checks that neither the secret nor
// any UserSig the client could have sent shows up in an error.
func TestNoSecretInErrors(t *testing.T) {
	const secret = "s3cr3t-key-0123456789abcdef0123456789abcdef"
	srv := startFake(t, imfake.WithSecretKey(secret))
	cfg := srv.ClientConfig()
	cfg.Timeout = 200 * time.Millisecond
	c := newClient(t, cfg)
	ctx := ctxT(t)

	var errs []error
	collect := func(err error) {
		if err == nil {
			t.Fatal("expected an error")
		}
		errs = append(errs, err)
	}
	// Auth failure (wrong identifier in the sig vs query is impossible from
	// the client; a wrong key is not).
	bad := cfg
	bad.SecretKey = secret + "x"
	collect(newClient(t, bad).ImportAccount(ctx, "u", ""))
	srv.FailNext(2, 70001)
	collect(c.ImportAccount(ctx, "u", ""))
	srv.SetHTTPStatus(503)
	collect(c.ImportAccount(ctx, "u", ""))
	srv.SetHTTPStatus(0)
	srv.Delay(time.Second)
	collect(c.ImportAccount(ctx, "u", ""))
	srv.Delay(0)

	// Nothing listening: the transport error (url.Error holds the URL).
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := cfg
	dead.BaseURL = "http://" + ln.Addr().String()
	ln.Close()
	collect(newClient(t, dead).ImportAccount(ctx, "u", ""))

	// A server that echoes the request URL and body in ErrorInfo and in a
	// non-JSON body.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "plain") {
			fmt.Fprintf(w, "oops %s", r.URL.String())
			return
		}
		sig := r.URL.Query().Get("usersig")
		fmt.Fprintf(w, `{"ActionStatus":"FAIL","ErrorCode":70003,"ErrorInfo":"bad sig %s"}`, sig)
	}))
	defer echo.Close()
	ec := cfg
	ec.BaseURL = echo.URL
	collect(newClient(t, ec).ImportAccount(ctx, "u", ""))
	if msg := errs[len(errs)-1].Error(); !strings.Contains(msg, "bad sig [usersig]") {
		t.Errorf("echoed UserSig not redacted before truncation: %q", msg)
	}
	collect(newClient(t, ec).ImportAccount(ctx, "plain", ""))

	now := time.Now()
	for _, err := range errs {
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, "usersig=") {
			t.Errorf("error leaks: %q", msg)
		}
		// Any sig issued around now, for either key, with the default TTL.
		for d := -5 * time.Second; d <= 5*time.Second; d += time.Second {
			for _, key := range []string{secret, bad.SecretKey} {
				sig, _ := tencentim.GenUserSig(cfg.SDKAppID, key, cfg.AdminIdentifier, 24*time.Hour, now.Add(d))
				if strings.Contains(msg, sig[len(sig)/2:len(sig)/2+24]) || strings.Contains(msg, sig[len(sig)-40:]) {
					t.Errorf("error holds a UserSig: %q", msg)
				}
			}
		}
		if len(msg) > 200 {
			t.Errorf("error text is %d bytes, not short: %q", len(msg), msg)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, cfg := range []configs.TencentIMConfig{
		{SecretKey: "k"},
		{SDKAppID: 1},
		{SDKAppID: 1, SecretKey: "k", BaseURL: "ftp://x"},
	} {
		if _, err := tencentim.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		} else if strings.Contains(err.Error(), "k\"") {
			t.Errorf("error mentions the secret: %v", err)
		}
	}
}

func TestEventRandomsStable(t *testing.T) {
	s1, r1 := tencentim.EventRandoms("lalu:r1:7:0")
	s2, r2 := tencentim.EventRandoms("lalu:r1:7:0")
	s3, r3 := tencentim.EventRandoms("lalu:r1:7:1")
	if s1 != s2 || r1 != r2 {
		t.Fatal("same event id, different randoms")
	}
	if s1 == s3 && r1 == r3 {
		t.Fatal("different event ids, same randoms")
	}
}

// At Tencent's own group limit, with the fake refusing (10023) any
// message past 40 in the last second as Tencent does, a group saturated
// by concurrent senders never has a message refused and never holds
// more than 40 arrivals in any one-second window.
func TestGroupSendsAtTencentsLimitNeverRefused(t *testing.T) {
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40; c.RatePerSecond = 1000 })
	saturateGroupAtLimit(t, srv, c, ctxT(t), 100)
}

// saturateGroupAtLimit sends n messages at once into one group, with the
// fake refusing past 40 in the last second as Tencent does: every one is
// accepted, and no one-second window holds more than 40 arrivals.
func saturateGroupAtLimit(t *testing.T, srv *imfake.Server, c *tencentim.Client, ctx context.Context, n int) {
	t.Helper()
	srv.SetGroupRateLimit(40)
	if err := c.CreateGroup(ctx, tencentim.Group{GroupID: "hot", Name: "hot"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := c.SendGroupMsg(ctx, tencentim.GroupMessage{GroupID: "hot", Random: uint32(i), Elem: tencentim.CustomElem{Data: "{}"}}); err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var hot []imfake.Call
	for _, m := range srv.GroupMessages("hot") {
		hot = append(hot, imfake.Call{At: m.At})
	}
	if len(hot) != n {
		t.Fatalf("%d messages arrived, want %d", len(hot), n)
	}
	if _, most := spread(hot); most > 40 {
		t.Errorf("%d messages arrived within one second at Tencent's limit of 40", most)
	}
}

// transitDelay holds each request a random time (up to max) before it
// leaves, as a loaded machine or a slow hop does: requests sent evenly
// reach Tencent bunched.
type transitDelay struct {
	next http.RoundTripper
	max  time.Duration
	mu   sync.Mutex
	rnd  *rand.Rand
}

func (d *transitDelay) RoundTrip(r *http.Request) (*http.Response, error) {
	d.mu.Lock()
	wait := time.Duration(d.rnd.Int64N(int64(d.max)))
	d.mu.Unlock()
	time.Sleep(wait)
	return d.next.RoundTrip(r)
}

// Sends spaced by the group's limiter but delayed in transit by up to
// 0.9 s each arrive bunched; the group's window of sends (in flight or
// answered within a second) still keeps every one-second window of
// arrivals within Tencent's 40, so none is refused.
func TestGroupSendsBunchedInTransitNeverOverTheLimit(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	hc := &http.Client{Transport: &transitDelay{next: http.DefaultTransport, max: 900 * time.Millisecond,
		rnd: rand.New(rand.NewPCG(uint64(seed), 7))}}
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.GroupRatePerSecond = 40; c.RatePerSecond = 1000 },
		tencentim.WithHTTPClient(hc))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	saturateGroupAtLimit(t, srv, c, ctx, 150)
}
