package roomim_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/room"
)

// BenchmarkPublishRoomEvent publishes room events through the real client
// to the fake over loopback HTTP, with Tencent's rate limits raised so the
// client and the fake are what is measured.
//
//   - rooms: every goroutine has its own room, one event per message.
//   - hot_room: every goroutine publishes into the same room; events
//     coalesce while a send is in flight.
func BenchmarkPublishRoomEvent(b *testing.B) {
	raise := func(c *configs.TencentIMConfig) { c.RatePerSecond = 1_000_000; c.GroupRatePerSecond = 1_000_000 }
	b.Run("rooms", func(b *testing.B) {
		f := setup(b, raise)
		ctx := ctxT(b)
		var roomN, seq atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			roomID := fmt.Sprintf("r%d", roomN.Add(1))
			if err := f.pub.EnsureGroup(ctx, "lalu", roomID, "", roomID); err != nil {
				b.Error(err)
				return
			}
			for pb.Next() {
				env := envelope(b, "lalu", roomID, seq.Add(1), room.RoomMicTaken{UserID: "u", Seat: 1})
				if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(len(f.fake.Messages())), "messages")
	})
	b.Run("hot_room", func(b *testing.B) {
		f := setup(b, raise)
		ctx := ctxT(b)
		if err := f.pub.EnsureGroup(ctx, "lalu", "hot", "", "hot"); err != nil {
			b.Fatal(err)
		}
		var seq atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				env := envelope(b, "lalu", "hot", seq.Add(1), room.RoomGiftSent{FromUserID: "u", ToUserID: "h", GiftID: "rose", GiftCount: 1})
				if err := f.pub.PublishRoomEvent(ctx, env); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(len(f.fake.GroupMessages("lalu_hot"))), "messages")
	})
}
