package tencentim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/tracing"
)

// API paths (servicename/command) the client calls.
const (
	APIAccountImport     = "im_open_login_svc/account_import"
	APISendMsg           = "openim/sendmsg"
	APISendGroupMsg      = "group_open_http_svc/send_group_msg"
	APICreateGroup       = "group_open_http_svc/create_group"
	APIDeleteGroupMember = "group_open_http_svc/delete_group_member"
	APIDestroyGroup      = "group_open_http_svc/destroy_group"
	APIBanGroupMember    = "group_open_http_svc/ban_group_member"
	APIForbidSendMsg     = "group_open_http_svc/forbid_send_msg"
	APIUnbanGroupMember  = "group_open_http_svc/unban_group_member"
	APIGetGroupBanMember = "group_open_http_svc/get_group_ban_member"
)

// maxResponse bounds a response body read: Tencent's answers are a few
// hundred bytes, anything larger is not a Tencent answer.
const maxResponse = 1 << 20

// Client calls Tencent Cloud IM's server REST API as the configured App
// administrator. It is safe for concurrent use.
type Client struct {
	cfg     configs.TencentIMConfig
	baseURL string
	http    *http.Client
	now     func() time.Time
	log     *slog.Logger

	sigMu     sync.Mutex
	sig       string
	sigIssued time.Time

	limMu      sync.Mutex
	apiLims    map[string]*rate.Limiter
	groupLims  map[string]*rate.Limiter
	groupWins  map[string]*groupWindow
	groupBurst int

	accounts *IDSet
	metrics  *Metrics
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the default pooled keep-alive HTTP client. Its
// Timeout should be zero or above configs.TencentIMConfig.Timeout: the
// client sets a per-call deadline itself.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithClock replaces time.Now for UserSig issue and renewal.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithAccountCacheSize bounds how many imported account ids are remembered
// (default 100 000). A forgotten id only costs one idempotent re-import.
func WithAccountCacheSize(n int) Option {
	return func(c *Client) { c.accounts = NewIDSet(n) }
}

// maxGroupLimiters: above this many per-group limiters, idle ones (bucket
// full again, so indistinguishable from a new one) are dropped.
const maxGroupLimiters = 4096

// New returns a client for cfg. Zero fields get the configs defaults, so a
// hand-built config (tests, dev) behaves like a loaded one.
func New(cfg configs.TencentIMConfig, opts ...Option) (*Client, error) {
	cfg = cfg.WithDefaults()
	if cfg.SDKAppID <= 0 {
		return nil, errors.New("tencent im: sdk_app_id is required")
	}
	if cfg.SecretKey == "" {
		return nil, errors.New("tencent im: secret_key is required")
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("tencent im: base_url %q is not an http(s) URL", cfg.BaseURL)
	}
	c := &Client{
		cfg:       cfg,
		baseURL:   strings.TrimRight(cfg.BaseURL, "/"),
		now:       time.Now,
		log:       slog.Default(),
		apiLims:   map[string]*rate.Limiter{},
		groupLims: map[string]*rate.Limiter{},
		groupWins: map[string]*groupWindow{},
		accounts:  NewIDSet(100_000),
	}
	// A burst of one spaces calls evenly; groupHeadroom keeps a
	// one-second window of arrivals within the configured rate.
	c.groupBurst = 1
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 64
		c.http = &http.Client{Transport: t}
	}
	return c, nil
}

// GroupType is the configured type of room groups.
func (c *Client) GroupType() string { return c.cfg.GroupType }

// FromAccount is the sender shown on room and notice messages ("" = the
// admin, which needs no import).
func (c *Client) FromAccount() string {
	if c.cfg.FromAccount == c.cfg.AdminIdentifier {
		return ""
	}
	return c.cfg.FromAccount
}

// userSig returns the cached admin UserSig, issuing a new one at half its
// life (or when the clock went backwards past its issue time).
func (c *Client) userSig(force bool) (string, error) {
	now := c.now()
	c.sigMu.Lock()
	defer c.sigMu.Unlock()
	age := now.Sub(c.sigIssued)
	if !force && c.sig != "" && age >= 0 && age < c.cfg.UserSigTTL/2 {
		return c.sig, nil
	}
	s, err := GenUserSig(c.cfg.SDKAppID, c.cfg.SecretKey, c.cfg.AdminIdentifier, c.cfg.UserSigTTL, now)
	if err != nil {
		return "", err
	}
	c.sig, c.sigIssued = s, now
	return s, nil
}

func (c *Client) apiLimiter(api string) *rate.Limiter {
	c.limMu.Lock()
	defer c.limMu.Unlock()
	l := c.apiLims[api]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(c.cfg.RatePerSecond), 1)
		c.apiLims[api] = l
	}
	return l
}

// groupHeadroom is the share of a group's limit the client sends at.
// Calls spaced exactly 1/limit apart put limit+1 of them into a closed
// one-second window (one at each edge), and the calls' transit moves
// them closer or further apart before Tencent counts them (its group
// limit counts what it received in a second): at 95% (38 a second for
// Tencent's 40) a window holds at most 39 sends, one spare for jitter.
const groupHeadroom = 0.95

func (c *Client) groupLimiter(groupID string) *rate.Limiter {
	c.limMu.Lock()
	defer c.limMu.Unlock()
	l := c.groupLims[groupID]
	if l == nil {
		if len(c.groupLims) >= maxGroupLimiters {
			now := time.Now()
			for id, gl := range c.groupLims {
				if gl.TokensAt(now) >= float64(c.groupBurst) {
					delete(c.groupLims, id)
				}
			}
		}
		l = rate.NewLimiter(rate.Limit(float64(c.cfg.GroupRatePerSecond)*groupHeadroom), c.groupBurst)
		c.groupLims[groupID] = l
	}
	return l
}

// groupSlot waits for the group's rate limiter and then for a slot in
// its window of sends (groupWindow); release ends the slot once the send
// is answered.
func (c *Client) groupSlot(ctx context.Context, groupID string) (release func(), err error) {
	start := time.Now()
	err = c.groupLimiter(groupID).Wait(ctx)
	var w *groupWindow
	if err == nil {
		w = c.groupWindow(groupID)
		err = w.acquire(ctx)
	}
	c.metrics.waited(APISendGroupMsg, LimiterGroup, start, err != nil)
	if err != nil {
		// rate.Limiter refuses up front when the wait would outlive the
		// deadline; that is still the caller's deadline, not Tencent's.
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return nil, &Error{API: APISendGroupMsg, Class: ClassRateLimited, Retryable: true,
			Reason: "local rate limit wait exceeds the deadline", cause: cause}
	}
	return w.release, nil
}

func (c *Client) groupWindow(groupID string) *groupWindow {
	c.limMu.Lock()
	defer c.limMu.Unlock()
	w := c.groupWins[groupID]
	if w == nil {
		if len(c.groupWins) >= maxGroupLimiters {
			now := time.Now()
			for id, gw := range c.groupWins {
				if gw.idle(now) {
					delete(c.groupWins, id)
				}
			}
		}
		w = &groupWindow{limit: c.cfg.GroupRatePerSecond}
		c.groupWins[groupID] = w
	}
	return w
}

// wait blocks until lim grants a call or ctx ends; it never fails a call
// for being over budget, it only delays it.
func (c *Client) wait(ctx context.Context, api, limiter string, lim *rate.Limiter) error {
	start := time.Now()
	err := lim.Wait(ctx)
	c.metrics.waited(api, limiter, start, err != nil)
	if err != nil {
		// rate.Limiter refuses up front when the wait would outlive the
		// deadline; that is still the caller's deadline, not Tencent's.
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return &Error{API: api, Class: ClassRateLimited, Retryable: true,
			Reason: "local rate limit wait exceeds the deadline", cause: cause}
	}
	return nil
}

// envelope is the part of every response the client reads.
type envelope struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorCode    int    `json:"ErrorCode"`
	ErrorInfo    string `json:"ErrorInfo"`
}

// call waits for the API's rate budget and performs one request. On
// 70001/70052 it issues a fresh UserSig and repeats the request once.
func (c *Client) call(ctx context.Context, api string, req, resp any) (err error) {
	// A span under a traced command's work (never the URL: it holds the
	// UserSig); nothing otherwise.
	ctx, span := tracing.Child(ctx, "tencentim "+api, trace.WithSpanKind(trace.SpanKindClient))
	defer func() { tracing.End(span, err) }()
	if err := c.wait(ctx, api, LimiterAPI, c.apiLimiter(api)); err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return &Error{API: api, Class: ClassBadRequest, Reason: "encode request", cause: err}
	}
	start := time.Now()
	err = c.do(ctx, api, body, resp, false)
	c.metrics.called(api, start, err)
	if sigExpiredCode(CodeOf(err)) {
		c.log.Warn("tencent im usersig rejected; issuing a new one", "api", api, "code", CodeOf(err))
		start = time.Now()
		err = c.do(ctx, api, body, resp, true)
		c.metrics.called(api, start, err)
	}
	return err
}

func (c *Client) do(ctx context.Context, api string, body []byte, resp any, freshSig bool) error {
	sig, err := c.userSig(freshSig)
	if err != nil {
		return &Error{API: api, Class: ClassAuth, Reason: "issue usersig", cause: err}
	}
	// Built by hand: the UserSig alphabet needs no escaping and Tencent's
	// handling of %2A (url.Values' encoding of '*') is unconfirmed.
	u := c.baseURL + "/v4/" + api +
		"?sdkappid=" + strconv.FormatInt(c.cfg.SDKAppID, 10) +
		"&identifier=" + url.QueryEscape(c.cfg.AdminIdentifier) +
		"&usersig=" + sig +
		"&random=" + strconv.FormatUint(uint64(rand.Uint32()), 10) +
		"&contenttype=json"

	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(cctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &Error{API: api, Class: ClassBadRequest, Reason: "build request"}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return transportError(api, err, ctx, cctx)
	}
	defer hresp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hresp.Body, maxResponse))
	if err != nil {
		return transportError(api, err, ctx, cctx)
	}
	if hresp.StatusCode != http.StatusOK {
		s := hresp.StatusCode
		retry := s >= 500 || s == http.StatusTooManyRequests || s == http.StatusRequestTimeout
		class := ClassTransport
		if s == http.StatusTooManyRequests {
			class = ClassRateLimited
		}
		return &Error{API: api, HTTPStatus: s, Class: class, Retryable: retry, Reason: "http status " + strconv.Itoa(s)}
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return &Error{API: api, Class: ClassTransport, Retryable: true, Reason: "response is not JSON"}
	}
	if env.ErrorCode != 0 || env.ActionStatus == "FAIL" {
		code := env.ErrorCode
		class, retry := ClassifyCode(code)
		if code == 0 { // FAIL without a code: nothing to go on, try again later
			class, retry = ClassUnknown, true
		}
		return &Error{API: api, Code: code, Class: class, Retryable: retry, Reason: shortReason(c.redact(env.ErrorInfo))}
	}
	if resp != nil {
		if err := json.Unmarshal(raw, resp); err != nil {
			return &Error{API: api, Class: ClassTransport, Retryable: true, Reason: "response fields malformed"}
		}
	}
	return nil
}

// redact drops anything of ours Tencent might echo back in ErrorInfo.
func (c *Client) redact(s string) string {
	c.sigMu.Lock()
	sig := c.sig
	c.sigMu.Unlock()
	if sig != "" && strings.Contains(s, sig) {
		s = strings.ReplaceAll(s, sig, "[usersig]")
	}
	if strings.Contains(s, c.cfg.SecretKey) {
		s = strings.ReplaceAll(s, c.cfg.SecretKey, "[secret]")
	}
	return s
}

// transportError turns an http.Client error into a short retryable error.
// url.Error's text holds the full URL (and so the UserSig): only its
// inner cause is inspected, never printed.
func transportError(api string, err error, parent, call context.Context) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	e := &Error{API: api, Class: ClassTransport, Retryable: true}
	var ne net.Error
	switch {
	case parent.Err() != nil:
		e.Reason, e.cause = "caller context done", parent.Err()
	case call.Err() != nil:
		e.Reason, e.cause = "call timeout", context.DeadlineExceeded
	case errors.As(err, &ne) && ne.Timeout():
		e.Reason, e.cause = "network timeout", context.DeadlineExceeded
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		e.Reason = "connection closed"
	default:
		var op *net.OpError
		if errors.As(err, &op) {
			e.Reason = "network error: " + op.Op
		} else {
			e.Reason = "network error"
		}
	}
	return e
}
