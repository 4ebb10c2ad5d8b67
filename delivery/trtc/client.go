package trtc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/tracing"
)

// Version is the TRTC API version the actions belong to.
const Version = "2019-07-22"

// Actions the client calls.
const (
	ActionRemoveUser  = "RemoveUserByStrRoomId"
	ActionDismissRoom = "DismissRoomByStrRoomId"
)

// MaxRemoveUsers is RemoveUserByStrRoomId's cap on users per call.
const MaxRemoveUsers = 10

// maxResponse bounds a response read: Tencent's answers are small.
const maxResponse = 1 << 20

// contentType is what the client sends and signs.
const contentType = "application/json"

// Client calls TRTC's server API. It is safe for concurrent use.
type Client struct {
	cfg      configs.TRTCConfig
	endpoint string
	host     string
	service  string
	http     *http.Client
	now      func() time.Time
	log      *slog.Logger

	limMu sync.Mutex
	lims  map[string]*rate.Limiter
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the pooled keep-alive HTTP client.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithClock replaces time.Now for the signature's timestamp.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// New returns a client for cfg (zero fields get the configs defaults).
func New(cfg configs.TRTCConfig, opts ...Option) (*Client, error) {
	cfg = cfg.WithDefaults()
	if cfg.SDKAppID <= 0 || cfg.SecretID == "" || cfg.SecretKey == "" {
		return nil, errors.New("trtc: sdk_app_id, secret_id and secret_key are required")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("trtc: endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	c := &Client{
		cfg:      cfg,
		endpoint: strings.TrimRight(cfg.Endpoint, "/") + "/",
		host:     u.Host,
		// The service is the host's first label: "trtc" for both the China
		// and the international endpoint, and for a fake on 127.0.0.1 the
		// service it checks is the same.
		service: "trtc",
		now:     time.Now,
		log:     slog.Default(),
		lims:    map[string]*rate.Limiter{},
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		c.http = &http.Client{Transport: t}
	}
	return c, nil
}

type removeUserReq struct {
	SdkAppID int64    `json:"SdkAppId"`
	RoomID   string   `json:"RoomId"`
	UserIDs  []string `json:"UserIds"`
}

type dismissReq struct {
	SdkAppID int64  `json:"SdkAppId"`
	RoomID   string `json:"RoomId"`
}

// RemoveUser removes a user from a string-id audio room
// (RemoveUserByStrRoomId). A room that does not exist (nobody is in it,
// or it was dismissed) has nobody to remove: success.
func (c *Client) RemoveUser(ctx context.Context, roomID, userID string) error {
	err := c.Call(ctx, ActionRemoveUser, removeUserReq{SdkAppID: c.cfg.SDKAppID, RoomID: roomID, UserIDs: []string{userID}}, nil)
	if CodeOf(err) == CodeRoomNotExist {
		return nil
	}
	return err
}

// DismissRoom removes everyone from a string-id audio room and closes it
// (DismissRoomByStrRoomId). A room that does not exist is dismissed.
func (c *Client) DismissRoom(ctx context.Context, roomID string) error {
	err := c.Call(ctx, ActionDismissRoom, dismissReq{SdkAppID: c.cfg.SDKAppID, RoomID: roomID}, nil)
	if CodeOf(err) == CodeRoomNotExist {
		return nil
	}
	return err
}

func (c *Client) limiter(action string) *rate.Limiter {
	c.limMu.Lock()
	defer c.limMu.Unlock()
	l := c.lims[action]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(c.cfg.RatePerSecond), 1)
		c.lims[action] = l
	}
	return l
}

// envelope is Cloud API 3.0's answer: everything under Response, an
// Error on failure (HTTP 200 either way).
type envelope struct {
	Response struct {
		Error *struct {
			Code    string `json:"Code"`
			Message string `json:"Message"`
		} `json:"Error"`
		RequestID string `json:"RequestId"`
	} `json:"Response"`
}

// Call runs one action with req as its JSON body, within Tencent's rate
// for the action (waiting, bounded by ctx) and the configured timeout,
// and decodes Response into resp (may be nil).
func (c *Client) Call(ctx context.Context, action string, req, resp any) (err error) {
	// A span under a traced command's work; nothing otherwise.
	ctx, span := tracing.Child(ctx, "trtc "+action, trace.WithSpanKind(trace.SpanKindClient))
	defer func() { tracing.End(span, err) }()
	body, err := json.Marshal(req)
	if err != nil {
		return &Error{Action: action, Message: "encode request", permanent: true, cause: err}
	}
	if err := c.limiter(action).Wait(ctx); err != nil {
		return &Error{Action: action, Message: "waiting for the action's rate: " + err.Error(), cause: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ts := c.now().Unix()
	sreq := Request{Host: c.host, ContentType: contentType, Payload: body, Service: c.service, Timestamp: ts}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return &Error{Action: action, Message: "build request", cause: err}
	}
	hreq.Header.Set("Authorization", sreq.Authorization(c.cfg.SecretID, c.cfg.SecretKey))
	hreq.Header.Set("Content-Type", contentType)
	hreq.Header.Set("X-TC-Action", action)
	hreq.Header.Set("X-TC-Version", Version)
	hreq.Header.Set("X-TC-Timestamp", fmt.Sprint(ts))
	hreq.Header.Set("X-TC-Region", c.cfg.Region)
	hres, err := c.http.Do(hreq)
	if err != nil {
		// The transport's error text can hold the URL, never the headers.
		return &Error{Action: action, Message: "transport: " + shortErr(err), cause: err}
	}
	defer hres.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(hres.Body, maxResponse))
	if err != nil {
		return &Error{Action: action, Message: "read response", cause: err}
	}
	if hres.StatusCode != http.StatusOK {
		return &Error{Action: action, HTTPStatus: hres.StatusCode, Message: fmt.Sprintf("HTTP %d", hres.StatusCode)}
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return &Error{Action: action, Message: "response is not Cloud API JSON"}
	}
	if e := env.Response.Error; e != nil {
		return &Error{Action: action, Code: e.Code, Message: cut(e.Message, 200), RequestID: env.Response.RequestID, permanent: permanentCode(e.Code)}
	}
	if resp != nil {
		var inner struct {
			Response json.RawMessage `json:"Response"`
		}
		_ = json.Unmarshal(raw, &inner)
		if err := json.Unmarshal(inner.Response, resp); err != nil {
			return &Error{Action: action, Message: "decode response", cause: err}
		}
	}
	return nil
}

func shortErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return cut(ue.Err.Error(), 200)
	}
	return cut(err.Error(), 200)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
