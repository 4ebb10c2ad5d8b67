package trtc

import (
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/tencentim"
)

// A user's UserSig is reused until half its life is gone, then signed
// anew; every ticket's PrivateMapKey is fresh, carries the rights asked
// for and verifies; many goroutines issuing at once get valid tickets.
func TestTicketsCacheUserSigs(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tk, err := NewTickets(TicketConfig{SDKAppID: 1400000001, SigKey: "k", TTL: time.Minute, UserSigTTL: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tk.Issue("alice", "app_r1", false)
	mu.Lock()
	now = now.Add(29 * time.Minute)
	mu.Unlock()
	b, _ := tk.Issue("alice", "app_r1", true)
	if a.UserSig != b.UserSig {
		t.Fatal("UserSig signed again before half its life")
	}
	if a.PrivateMapKey == b.PrivateMapKey || a.Privileges != PrivilegeEnterRoom|PrivilegeReceiveAudio || b.Privileges != a.Privileges|PrivilegeSendAudio {
		t.Fatalf("keys %v %v", a.Privileges, b.Privileges)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	c, _ := tk.Issue("alice", "app_r1", true)
	if c.UserSig == a.UserSig {
		t.Fatal("UserSig past half its life reused")
	}
	if err := tencentim.VerifyUserSig(c.UserSig, 1400000001, "k", "alice", clock().Add(59*time.Minute)); err != nil {
		t.Fatalf("renewed UserSig: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := []string{"u1", "u2", "u3", "u4"}[i%4]
			got, err := tk.Issue(user, "app_r1", i%2 == 0)
			if err != nil {
				t.Error(err)
				return
			}
			rec, err := VerifyPrivateMapKey(got.PrivateMapKey, 1400000001, "k", user, "app_r1", clock())
			if err != nil || rec.Privileges != Privileges(i%2 == 0) {
				t.Errorf("%s: %+v %v", user, rec, err)
			}
			if err := tencentim.VerifyUserSig(got.UserSig, 1400000001, "k", user, clock()); err != nil {
				t.Errorf("%s UserSig: %v", user, err)
			}
		}()
	}
	wg.Wait()
	if _, err := NewTickets(TicketConfig{SDKAppID: 1, TTL: time.Minute, UserSigTTL: time.Hour}); err == nil {
		t.Fatal("a signer without a key")
	}
}

func BenchmarkTicketIssue(b *testing.B) {
	tk, _ := NewTickets(TicketConfig{SDKAppID: 1400000001, SigKey: "k", TTL: time.Minute, UserSigTTL: time.Hour})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := tk.Issue("user-"+string(rune('a'+i%26)), "app_room-1", i%2 == 0); err != nil {
			b.Fatal(err)
		}
	}
}
