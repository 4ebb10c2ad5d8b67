package trtcfake

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
)

func start(t *testing.T, opts ...Option) (*Server, *trtc.Tickets, *trtc.Client) {
	t.Helper()
	s, err := Start("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := s.ClientConfig()
	tk, err := trtc.NewTickets(trtc.TicketConfig{SDKAppID: cfg.SDKAppID, SigKey: cfg.SigKey, TTL: cfg.TicketTTL, UserSigTTL: cfg.UserSigTTL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := trtc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, tk, c
}

// With advanced permission control on, the fake lets in exactly who holds
// a key for that user and room with the enter bit, lets publish only with
// the send-audio bit, and refuses forged, foreign or missing keys and
// UserSigs; without it, a UserSig is enough.
func TestPermissionControlOnEnterAndPublish(t *testing.T) {
	s, tk, _ := start(t, WithAdvancedPermission())
	listener, _ := tk.Issue("lis", "app_r1", false)
	speaker, _ := tk.Issue("spk", "app_r1", true)
	other, _ := tk.Issue("spk", "app_r2", true)
	if err := s.Join("app_r1", "lis", listener.UserSig, listener.PrivateMapKey); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAudio("app_r1", "lis"); !errors.Is(err, ErrNoPermission) {
		t.Fatalf("listener publishing: %v", err)
	}
	if err := s.Join("app_r1", "spk", speaker.UserSig, other.PrivateMapKey); !errors.Is(err, ErrPrivateMapKey) {
		t.Fatalf("key of another room: %v", err)
	}
	if err := s.Join("app_r1", "spk", speaker.UserSig, ""); !errors.Is(err, ErrPrivateMapKey) {
		t.Fatalf("no key: %v", err)
	}
	if err := s.Join("app_r1", "spk", speaker.UserSig, listener.PrivateMapKey); !errors.Is(err, ErrPrivateMapKey) {
		t.Fatalf("another user's key: %v", err)
	}
	if err := s.Join("app_r1", "spk", listener.UserSig, speaker.PrivateMapKey); !errors.Is(err, ErrUserSig) {
		t.Fatalf("another user's UserSig: %v", err)
	}
	if err := s.Join("app_r1", "spk", speaker.UserSig, speaker.PrivateMapKey); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAudio("app_r1", "spk"); err != nil || !s.Publishing("app_r1", "spk") {
		t.Fatalf("speaker publishing: %v", err)
	}
	// A fresh key with more rights, presented in the room, lets the
	// listener publish.
	up, _ := tk.Issue("lis", "app_r1", true)
	if err := s.UpdatePrivateMapKey("app_r1", "lis", up.PrivateMapKey); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAudio("app_r1", "lis"); err != nil {
		t.Fatalf("after a new key: %v", err)
	}
	open, _, _ := start(t)
	sig, _ := tencentim.GenUserSig(open.sdkAppID, open.sigKey, "anyone", time.Hour, time.Now())
	if err := open.Join("app_r1", "anyone", sig, ""); err != nil {
		t.Fatalf("without the control a UserSig is enough: %v", err)
	}
	if err := open.StartAudio("app_r1", "anyone"); err != nil {
		t.Fatal(err)
	}
}

// A user whose rights shrank and who was removed comes back with the key
// they held: TRTC takes it (the key is still valid), which is why the
// room removes them again on the report of their enter or publish; a key
// issued after the shrink carries the new rights and publishing with it
// is refused.
func TestOldTicketStillOpensAndNewOneNarrows(t *testing.T) {
	s, tk, c := start(t, WithAdvancedPermission())
	old, _ := tk.Issue("u", "app_r1", true)
	if err := s.Join("app_r1", "u", old.UserSig, old.PrivateMapKey); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAudio("app_r1", "u"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveUser(context.Background(), "app_r1", "u"); err != nil {
		t.Fatal(err)
	}
	if s.InRoom("app_r1", "u") || s.Publishing("app_r1", "u") {
		t.Fatal("removed user still in the room or publishing")
	}
	if err := s.StartAudio("app_r1", "u"); !errors.Is(err, ErrNotInRoom) {
		t.Fatalf("publishing after removal: %v", err)
	}
	fresh, _ := tk.Issue("u", "app_r1", false)
	if err := s.Join("app_r1", "u", fresh.UserSig, fresh.PrivateMapKey); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAudio("app_r1", "u"); !errors.Is(err, ErrNoPermission) {
		t.Fatalf("publishing on a listener's fresh ticket: %v", err)
	}
}

// A cut connection is dropped after the silence timeout with reason
// timeout (not before); a reconnect within it keeps the user; every
// enter, audio start and exit is reported in order.
func TestSilentUserDroppedAfterTimeout(t *testing.T) {
	var mu sync.Mutex
	var acts []Activity
	s, tk, _ := start(t, WithSilenceTimeout(300*time.Millisecond), WithActivity(func(a Activity) {
		mu.Lock()
		acts = append(acts, a)
		mu.Unlock()
	}))
	for _, u := range []string{"cut", "back"} {
		k, _ := tk.Issue(u, "app_r1", true)
		if err := s.Join("app_r1", u, k.UserSig, k.PrivateMapKey); err != nil {
			t.Fatal(err)
		}
		if err := s.StartAudio("app_r1", u); err != nil {
			t.Fatal(err)
		}
		s.CutAudio("app_r1", u)
	}
	time.Sleep(150 * time.Millisecond)
	s.Reconnect("app_r1", "back")
	if !s.InRoom("app_r1", "cut") {
		t.Fatal("dropped before the timeout")
	}
	deadline := time.Now().Add(2 * time.Second)
	for s.InRoom("app_r1", "cut") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s.InRoom("app_r1", "cut") || !s.InRoom("app_r1", "back") {
		t.Fatalf("after the timeout: cut in %v, back in %v", s.InRoom("app_r1", "cut"), s.InRoom("app_r1", "back"))
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var cut []string
	for _, a := range acts {
		if a.UserID == "cut" {
			cut = append(cut, a.Kind+"/"+a.Reason)
		}
	}
	want := []string{"enter/", "start_audio/", "stop_audio/", "exit/timeout"}
	if len(cut) != len(want) {
		t.Fatalf("activity of cut: %v, want %v", cut, want)
	}
	for i := range want {
		if cut[i] != want[i] {
			t.Fatalf("activity of cut: %v, want %v", cut, want)
		}
	}
}
