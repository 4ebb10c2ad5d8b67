package tencentim_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

// A ban list longer than a page comes back whole, in one listing of three
// pages (250 bans, 100 a page), each entry with the end the ban was set
// for (whole seconds); a ban already over is not listed; a missing group
// is Tencent's 10010.
func TestGetGroupBanMembersPages(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	srv := startFake(t, imfake.WithClock(clk.Now))
	c := newClient(t, srv.ClientConfig(), tencentim.WithClock(clk.Now))
	ctx := ctxT(t)
	gid := "lalu_banlist"
	if err := c.CreateGroup(ctx, tencentim.Group{GroupID: gid, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i := range 250 {
		u := fmt.Sprintf("u%03d", i)
		secs := int64(60 + i)
		if err := c.BanGroupMember(ctx, gid, []string{u}, secs, ""); err != nil {
			t.Fatal(err)
		}
		want[u] = clk.Now().Unix() + secs
	}
	if err := c.BanGroupMember(ctx, gid, []string{"short"}, 1, ""); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	before := len(srv.Calls())
	got, err := c.GetGroupBanMembers(ctx, gid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d bans, want %d", len(got), len(want))
	}
	for _, b := range got {
		if w, ok := want[b.UserID]; !ok || b.Until.Unix() != w {
			t.Fatalf("%s until %d, want %d (listed: %v)", b.UserID, b.Until.Unix(), w, ok)
		}
		delete(want, b.UserID)
	}
	pages := 0
	for _, call := range srv.Calls()[before:] {
		if call.API == tencentim.APIGetGroupBanMember {
			pages++
		}
	}
	if pages != 3 {
		t.Fatalf("%d pages for 250 bans, want 3", pages)
	}
	if _, err := c.GetGroupBanMembers(ctx, "lalu_nogroup"); tencentim.CodeOf(err) != 10010 {
		t.Fatalf("missing group: %v", err)
	}
}

// A server whose NextOffset does not move forward gets a retryable error,
// not an endless listing.
func TestGetGroupBanMembersStuckOffset(t *testing.T) {
	calls := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if !strings.Contains(r.URL.Path, tencentim.APIGetGroupBanMember) {
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, `{"ActionStatus":"OK","ErrorCode":0,"BannedAccountList":[{"Member_Account":"u1","BannedUntil":1660875916}],"NextOffset":1}`)
	}))
	t.Cleanup(ts.Close)
	c := newClient(t, configs.TencentIMConfig{SDKAppID: 1400000000, SecretKey: "k", BaseURL: ts.URL})
	_, err := c.GetGroupBanMembers(ctxT(t), "g")
	if err == nil || !errors.Is(err, tencentim.ErrRetryable) {
		t.Fatalf("stuck NextOffset: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d calls before giving up, want 2", calls)
	}
}
