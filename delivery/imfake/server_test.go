package imfake_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

var quiet = slog.New(slog.DiscardHandler)

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

func start(t *testing.T, opts ...imfake.Option) *imfake.Server {
	t.Helper()
	s, err := imfake.Start("127.0.0.1:0", append([]imfake.Option{imfake.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type answer struct {
	ActionStatus  string
	ErrorCode     int
	ErrorInfo     string
	MsgSeq        uint64
	MsgKey        string
	MsgDropReason string
	GroupId       string
}

// raw posts body to api with the query built from q (nil = a valid one).
func raw(t *testing.T, s *imfake.Server, api, query, body string) answer {
	t.Helper()
	resp, err := http.Post(s.URL()+"/v4/"+api+"?"+query, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d; Tencent answers 200 for API errors", resp.StatusCode)
	}
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if (a.ErrorCode == 0) != (a.ActionStatus == "OK") {
		t.Fatalf("envelope inconsistent: %+v", a)
	}
	return a
}

func validQuery(t *testing.T, s *imfake.Server, now time.Time) string {
	cfg := s.ClientConfig()
	sig, err := tencentim.GenUserSig(cfg.SDKAppID, cfg.SecretKey, cfg.AdminIdentifier, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("sdkappid=%d&identifier=%s&usersig=%s&random=42&contenttype=json", cfg.SDKAppID, cfg.AdminIdentifier, sig)
}

func TestGatewayChecks(t *testing.T) {
	s := start(t)
	cfg := s.ClientConfig()
	q := validQuery(t, s, time.Now())
	otherSig, _ := tencentim.GenUserSig(cfg.SDKAppID, cfg.SecretKey, "someone", time.Hour, time.Now())
	adminSigOtherKey, _ := tencentim.GenUserSig(cfg.SDKAppID, "wrong", cfg.AdminIdentifier, time.Hour, time.Now())
	tests := []struct {
		name, query, body string
		code              int
	}{
		{"ok", q, `{"UserID":"u1"}`, 0},
		{"usersig %2A-escaped is accepted too", strings.ReplaceAll(q, "*", "%2A"), `{"UserID":"u1"}`, 0},
		{"no usersig", strings.Replace(q, "usersig=", "x=", 1), `{}`, 70002},
		{"no random", strings.Replace(q, "random=42", "", 1), `{}`, 60002},
		{"contenttype", strings.Replace(q, "contenttype=json", "contenttype=xml", 1), `{}`, 60002},
		{"unknown app", strings.Replace(q, fmt.Sprint(cfg.SDKAppID), "1", 1), `{}`, 70020},
		{"wrong key", strings.Replace(q, q[strings.Index(q, "usersig=")+8:strings.Index(q, "&random")], adminSigOtherKey, 1), `{}`, 70009},
		{"sig of another identifier", strings.Replace(q, q[strings.Index(q, "usersig=")+8:strings.Index(q, "&random")], otherSig, 1), `{}`, 70013},
		{"garbage sig", strings.Replace(q, "usersig=", "usersig=zz", 1), `{}`, 70003},
		{"empty body", q, ``, 60003},
		{"bad json", q, `{"UserID":`, 60003},
		// send_group_msg finds a syntax error in its own decode (one scan
		// of the body): the same code, wherever the error is.
		{"bad json to send_group_msg", q, `{"GroupId":"g","Random":1,"MsgBody":[`, 60003},
		{"bad json to send_group_msg, after the fields", q, `{"GroupId":"g","Random":1,"MsgBody":[]}}`, 60003},
		{"unknown api", q, `{}`, 60002},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := tencentim.APIAccountImport
			switch {
			case tc.name == "unknown api":
				api = "openim/nope"
			case strings.Contains(tc.name, "send_group_msg"):
				api = tencentim.APISendGroupMsg
			}
			if a := raw(t, s, api, tc.query, tc.body); a.ErrorCode != tc.code {
				t.Fatalf("code %d (%s), want %d", a.ErrorCode, a.ErrorInfo, tc.code)
			}
		})
	}
	// A sig signed for someone not an admin, with that someone as the
	// identifier: valid sig, not an admin.
	notAdmin := fmt.Sprintf("sdkappid=%d&identifier=someone&usersig=%s&random=1&contenttype=json", cfg.SDKAppID, otherSig)
	if a := raw(t, s, tencentim.APIAccountImport, notAdmin, `{"UserID":"u"}`); a.ErrorCode != 60010 {
		t.Fatalf("non-admin identifier: %+v", a)
	}
	resp, err := http.Get(s.URL() + "/v4/" + tencentim.APIAccountImport + "?" + q)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET answered %d", resp.StatusCode)
	}
}

func TestAPIRules(t *testing.T) {
	s := start(t)
	q := validQuery(t, s, time.Now())
	big := strings.Repeat("x", 12*1024+1)
	steps := []struct {
		name, api, body string
		code            int
	}{
		{"c2c to unknown account", tencentim.APISendMsg, `{"To_Account":"u1","MsgRandom":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 90012},
		{"import", tencentim.APIAccountImport, `{"UserID":"u1"}`, 0},
		{"import too long", tencentim.APIAccountImport, `{"UserID":"` + strings.Repeat("u", 33) + `"}`, 70402},
		{"c2c MsgBody not array", tencentim.APISendMsg, `{"To_Account":"u1","MsgRandom":1,"MsgBody":{"MsgType":"TIMCustomElem"}}`, 90002},
		{"c2c MsgBody empty", tencentim.APISendMsg, `{"To_Account":"u1","MsgRandom":1,"MsgBody":[]}`, 90007},
		{"c2c no MsgRandom", tencentim.APISendMsg, `{"To_Account":"u1","MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 90001},
		{"c2c too large", tencentim.APISendMsg, `{"To_Account":"u1","MsgRandom":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"` + big + `"}}]}`, 93000},
		{"c2c unknown sender", tencentim.APISendMsg, `{"From_Account":"ghost","To_Account":"u1","MsgRandom":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 20003},
		{"c2c ok", tencentim.APISendMsg, `{"To_Account":"u1","MsgSeq":7,"MsgRandom":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 0},
		{"group send unknown group", tencentim.APISendGroupMsg, `{"GroupId":"g1","Random":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 10010},
		{"create bad type", tencentim.APICreateGroup, `{"Type":"Huge","GroupId":"g1","Name":"g"}`, 10004},
		{"create name too long", tencentim.APICreateGroup, `{"Type":"AVChatRoom","GroupId":"g1","Name":"` + strings.Repeat("n", 31) + `"}`, 10004},
		{"create reserved id", tencentim.APICreateGroup, `{"Type":"AVChatRoom","GroupId":"@TGS#x","Name":"g"}`, 10015},
		{"create owner not imported", tencentim.APICreateGroup, `{"Owner_Account":"ghost","Type":"AVChatRoom","GroupId":"g1","Name":"g"}`, 10004},
		{"create AVChatRoom with members", tencentim.APICreateGroup, `{"Type":"AVChatRoom","GroupId":"g1","Name":"g","MemberList":[{"Member_Account":"u1"}]}`, 10007},
		{"create", tencentim.APICreateGroup, `{"Type":"AVChatRoom","GroupId":"g1","Name":"g"}`, 0},
		{"create again", tencentim.APICreateGroup, `{"Type":"AVChatRoom","GroupId":"g1","Name":"g"}`, 10025},
		{"create taken by another owner", tencentim.APICreateGroup, `{"Owner_Account":"u1","Type":"AVChatRoom","GroupId":"g1","Name":"g"}`, 10021},
		{"add member AVChatRoom", "group_open_http_svc/add_group_member", `{"GroupId":"g1","MemberList":[{"Member_Account":"u1"}]}`, 10007},
		{"delete member AVChatRoom", tencentim.APIDeleteGroupMember, `{"GroupId":"g1","MemberToDel_Account":["u1"]}`, 10004},
		{"group send bad priority", tencentim.APISendGroupMsg, `{"GroupId":"g1","Random":1,"MsgPriority":"Urgent","MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 10004},
		{"group send", tencentim.APISendGroupMsg, `{"GroupId":"g1","Random":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}]}`, 0},
		{"group send 2", tencentim.APISendGroupMsg, `{"GroupId":"g1","Random":2,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"y"}}]}`, 0},
		{"destroy", tencentim.APIDestroyGroup, `{"GroupId":"g1"}`, 0},
		{"destroy again", tencentim.APIDestroyGroup, `{"GroupId":"g1"}`, 10010},
	}
	for _, st := range steps {
		if a := raw(t, s, st.api, q, st.body); a.ErrorCode != st.code {
			t.Fatalf("%s: code %d (%s), want %d", st.name, a.ErrorCode, a.ErrorInfo, st.code)
		}
	}
	msgs := s.Messages()
	if len(msgs) != 3 || msgs[0].Kind != "c2c" || msgs[0].MsgSeq != 7 || msgs[1].MsgSeq != 1 || msgs[2].MsgSeq != 2 {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestDedupeWindows(t *testing.T) {
	clk := &clock{t: time.Now()}
	s := start(t, imfake.WithClock(clk.Now))
	q := func() string { return validQuery(t, s, clk.Now()) }
	raw(t, s, tencentim.APIAccountImport, q(), `{"UserID":"u1"}`)
	raw(t, s, tencentim.APICreateGroup, q(), `{"Type":"Public","GroupId":"g","Name":"g"}`)
	c2c := `{"To_Account":"u1","MsgSeq":5,"MsgRandom":6,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}],"CloudCustomData":"{\"event_id\":\"e1\"}"}`
	c2cOtherBody := strings.Replace(c2c, `"Data":"x"`, `"Data":"y"`, 1)
	grp := `{"GroupId":"g","Random":9,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"x"}}],"CloudCustomData":"{\"event_id\":\"e2\"}"}`

	first := raw(t, s, tencentim.APISendMsg, q(), c2c)
	again := raw(t, s, tencentim.APISendMsg, q(), c2c)
	if again.MsgKey != first.MsgKey {
		t.Fatalf("duplicate answered with another MsgKey: %q vs %q", again.MsgKey, first.MsgKey)
	}
	raw(t, s, tencentim.APISendMsg, q(), c2cOtherBody) // other content: not a duplicate
	g1 := raw(t, s, tencentim.APISendGroupMsg, q(), grp)
	g2 := raw(t, s, tencentim.APISendGroupMsg, q(), grp)
	if g1.MsgSeq != 1 || g2.MsgSeq != 1 {
		t.Fatalf("group duplicate seqs %d, %d", g1.MsgSeq, g2.MsgSeq)
	}
	if s.Duplicates() != 2 || s.EventIDCounts()["e1"] != 2 || s.EventIDCounts()["e2"] != 1 {
		t.Fatalf("duplicates %d, counts %v", s.Duplicates(), s.EventIDCounts())
	}

	clk.Add(121 * time.Second) // past C2C's 120 s, inside the group's 5 min
	raw(t, s, tencentim.APISendMsg, q(), c2c)
	raw(t, s, tencentim.APISendGroupMsg, q(), grp)
	if s.Duplicates() != 3 || s.EventIDCounts()["e1"] != 3 {
		t.Fatalf("after 121 s: duplicates %d, counts %v", s.Duplicates(), s.EventIDCounts())
	}
	clk.Add(3 * time.Minute)
	if a := raw(t, s, tencentim.APISendGroupMsg, q(), grp); a.MsgSeq != 2 {
		t.Fatalf("after 5 min the group message is new: seq %d", a.MsgSeq)
	}
	if s.EventIDCounts()["e2"] != 2 {
		t.Fatalf("counts %v", s.EventIDCounts())
	}
}

func TestFaults(t *testing.T) {
	s := start(t)
	q := validQuery(t, s, time.Now())
	imp := `{"UserID":"u1"}`

	s.FailNext(2, 20004, tencentim.APISendMsg)
	if a := raw(t, s, tencentim.APIAccountImport, q, imp); a.ErrorCode != 0 {
		t.Fatalf("fault for another API hit: %+v", a)
	}
	s.FailNext(2, 20004)
	for i := range 3 {
		want := 20004
		if i == 2 {
			want = 0
		}
		if a := raw(t, s, tencentim.APIAccountImport, q, imp); a.ErrorCode != want {
			t.Fatalf("call %d: code %d want %d", i, a.ErrorCode, want)
		}
	}

	s.FailFraction(0.5, 90994)
	failed := 0
	for range 200 {
		if raw(t, s, tencentim.APIAccountImport, q, imp).ErrorCode == 90994 {
			failed++
		}
	}
	if failed < 50 || failed > 150 {
		t.Fatalf("%d of 200 failed at p=0.5", failed)
	}
	s.ResetFaults()

	s.SetHTTPStatus(502)
	resp, err := http.Post(s.URL()+"/v4/"+tencentim.APIAccountImport+"?"+q, "application/json", strings.NewReader(imp))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	s.ResetFaults()

	// An outage: 503 for every call until it ends, then answers again.
	post := func() int {
		resp, err := http.Post(s.URL()+"/v4/"+tencentim.APIAccountImport+"?"+q, "application/json", strings.NewReader(imp))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	end := s.FailFor(400 * time.Millisecond)
	if code := post(); code != http.StatusServiceUnavailable {
		t.Fatalf("during the outage: status %d, want 503", code)
	}
	time.Sleep(time.Until(end) + 10*time.Millisecond)
	if code := post(); code != http.StatusOK {
		t.Fatalf("after the outage: status %d, want 200", code)
	}
	s.FailFor(time.Hour)
	s.FailFor(0) // ends it early
	if code := post(); code != http.StatusOK {
		t.Fatalf("after ending the outage early: status %d, want 200", code)
	}

	s.Delay(300 * time.Millisecond)
	start := time.Now()
	raw(t, s, tencentim.APIAccountImport, q, imp)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("delayed answer after %v", el)
	}
	s.ResetFaults()
	s.DelayFraction(1, 200*time.Millisecond)
	start = time.Now()
	raw(t, s, tencentim.APIAccountImport, q, imp)
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("fractionally delayed answer after %v", el)
	}
}

func TestDebugEndpoints(t *testing.T) {
	s := start(t)
	q := validQuery(t, s, time.Now())
	raw(t, s, tencentim.APIAccountImport, q, `{"UserID":"u1"}`)
	raw(t, s, tencentim.APISendMsg, q, `{"To_Account":"u1","MsgRandom":1,"MsgBody":[{"MsgType":"TIMCustomElem","MsgContent":{"Data":"<b>hi</b>","Ext":"room_notice"}}],"CloudCustomData":"{\"event_id\":\"evt-9\"}"}`)

	resp, err := http.Get(s.URL() + "/debug/messages")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Messages []imfake.Message `json:"messages"`
		Calls    int              `json:"calls"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Messages) != 1 || out.Messages[0].EventIDs[0] != "evt-9" || out.Calls != 2 {
		t.Fatalf("/debug/messages = %+v, %v", out, err)
	}

	resp, err = http.Get(s.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "evt-9") || !strings.Contains(string(page), "&lt;b&gt;hi") || strings.Contains(string(page), "<b>hi") {
		t.Fatalf("index page does not list (escaped) messages:\n%s", page)
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	if s, err := imfake.Start("0.0.0.0:0"); err == nil {
		s.Close()
		t.Fatal("listened on all interfaces")
	}
}

func TestStartDevConfigWorksWithClient(t *testing.T) {
	s, cfg, err := imfake.StartDev(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cfg.BaseURL != s.URL() || cfg.SecretKey == "" || cfg.SDKAppID != imfake.DefaultSDKAppID {
		t.Fatalf("dev config = %+v", cfg)
	}
	c, err := tencentim.New(cfg, tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportAccount(t.Context(), "dev_user", ""); err != nil {
		t.Fatal(err)
	}
}
