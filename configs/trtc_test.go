package configs

import (
	"testing"
	"time"
)

// TestTRTCTicketKeys: the ticket keys' defaults, and every unsafe or
// incomplete combination refused naming its key.
func TestTRTCTicketKeys(t *testing.T) {
	c, err := Parse([]byte("trtc:\n  sdk_app_id: 1400000001\n  sig_key: k\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TRTC.TicketTTL != 5*time.Minute || c.TRTC.UserSigTTL != 24*time.Hour || c.TRTC.EnforceTickets {
		t.Fatalf("defaults: %s %s %v", c.TRTC.TicketTTL, c.TRTC.UserSigTTL, c.TRTC.EnforceTickets)
	}
	on := "trtc:\n  enabled: true\n  sdk_app_id: 1400000001\n  secret_id: id\n  secret_key: sk\n"
	if _, err := Parse([]byte(on + "  sig_key: k\n  enforce_tickets: true\n")); err != nil {
		t.Fatalf("complete enforcing config: %v", err)
	}
	for _, c := range []struct{ yaml, key string }{
		{"trtc:\n  sig_key: k\n", "trtc.sdk_app_id"},
		{on + "  enforce_tickets: true\n", "trtc.sig_key"},
		{"trtc:\n  sdk_app_id: 1400000001\n  sig_key: k\n  enforce_tickets: true\n", "trtc.enforce_tickets"},
		{"trtc:\n  ticket_ttl: 1s\n", "trtc.ticket_ttl"},
		{"trtc:\n  ticket_ttl: 48h\n", "trtc.ticket_ttl"},
		{"trtc:\n  ticket_ttl: 10m\n  user_sig_ttl: 15m\n", "trtc.user_sig_ttl"},
	} {
		_, err := Parse([]byte(c.yaml))
		wantKey(t, c.yaml, err, c.key, "")
	}
}
