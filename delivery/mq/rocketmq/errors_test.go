//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package rocketmq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A wrong secret key, an unreachable name server and a missing topic each
// fail a publish promptly with an error that says which, and none of them
// carries the secret key.
func TestRocketMQPublishErrorsSayWhatIsWrong(t *testing.T) {
	shared := sharedInstance()
	topic := shared.topic(t)
	wrong := shared
	wrong.secretKey = "not-the-secret-9f3a"
	unreachable := shared
	unreachable.nameServer = "127.0.0.1:1"
	for _, tc := range []struct {
		name  string
		in    instance
		topic string
		want  string
	}{
		{"wrong secret key", wrong, topic, `refused the credentials (notice.mq.access_key "roomcell"`},
		{"unreachable name server", unreachable, topic, "unreachable"},
		{"missing topic", shared, "roomcell_no_such_topic", "topic not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in.dial(t, WithSendTimeout(2*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := c.Publish(ctx, tc.topic, "RoomUserKicked", "k1", []byte("{}"))
			if err == nil {
				t.Fatal("published")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.in.secretKey) {
				t.Fatalf("error carries the secret key: %v", err)
			}
			var p interface{ Permanent() bool }
			if errors.As(err, &p) && p.Permanent() {
				t.Fatalf("%v is permanent: the relay would park rows that a fixed broker would take", err)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Fatalf("the publish took %s", d)
			}
		})
	}
}
