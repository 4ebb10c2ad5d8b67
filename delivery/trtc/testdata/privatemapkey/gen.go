// Command gen prints vectors.txt: PrivateMapKeys issued by Tencent's own
// library, github.com/tencentyun/tls-sig-api-v2-golang (commit 66c185f,
// package tencentyun, GenPrivateMapKeyWithStringRoomID), with the sample
// key of that library's tests. It is not part of the build (testdata) and
// is kept to show where the vectors come from. To regenerate: copy this
// file into an empty module, `go mod init gen`, point a replace directive
// at a checkout of the library, `go run . > vectors.txt`.
//
// Each line: user room privilege_bits ttl_seconds key. The key's issue
// time is inside it (TLS.time); the library takes it from the clock.
package main

import (
	"fmt"

	"github.com/tencentyun/tls-sig-api-v2-golang/tencentyun"
)

func main() {
	const key = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e"
	for _, c := range []struct {
		user, room string
		bits       uint32
	}{{"alice", "app1_r42", 2 | 8}, {"bob", "app1_r42", 2 | 4 | 8}, {"u_9", "7c0e-long-room-id-abcdefghijklmnopqrstuvwxyz0123456789", 255}} {
		s, err := tencentyun.GenPrivateMapKeyWithStringRoomID(1400000000, key, c.user, 300, c.room, c.bits)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s %d 300 %s\n", c.user, c.room, c.bits, s)
	}
}
