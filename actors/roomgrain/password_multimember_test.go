//go:build !race

// Two cluster members in one process: built without -race, as
// multimember_test.go (the reason is there).

package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// A guesser who spreads tries over two members gets one bucket's worth:
// the room's grain (on whichever member hosts it) holds the bucket and
// sees every try. A refusal answered through the other member carries
// the bucket's exact wait, not a guess at it.
func TestMultiMemberPasswordGuessesShareOneBucket(t *testing.T) {
	store := memdb.New()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	cfg.Room.PasswordKey = strings.Repeat("m", 32)
	var nowMs atomic.Int64
	nowMs.Store(time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC).UnixMilli())
	a, b := twoMembers(t, cfg, Deps{Store: store, Gifts: fixedHeat(1), Config: cfg.Room, Guesses: memdb.NewGuesses(), Clock: func() time.Time { return time.UnixMilli(nowMs.Load()) }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := []*Client{{Cluster: a.Cluster, AttemptTimeout: 3 * time.Second}, {Cluster: b.Cluster, AttemptTimeout: 3 * time.Second}}
	must := func(rc *v1.RoomCommand) {
		if _, err := clients[0].Execute(ctx, rc); err != nil {
			t.Fatalf("%v: %v", rc, err)
		}
	}
	// Rooms enough that some live on each member.
	const rooms = 6
	for i := range rooms {
		roomID := fmt.Sprint("r", i)
		must(&v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "n"}}})
		must(&v1.RoomCommand{Command: &v1.RoomCommand_SetRoomPassword{SetRoomPassword: &v1.SetRoomPasswordRequest{CommandId: "c2", AppCode: "app", RoomId: roomID, UserId: "owner", Password: "sesame"}}})
	}
	try := func(c *Client, roomID string, n int) error {
		_, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
			CommandId: fmt.Sprintf("g%d", n), AppCode: "app", RoomId: roomID, UserId: "guesser", Password: fmt.Sprint("guess-", n)}}})
		return err
	}
	for i := range rooms {
		roomID := fmt.Sprint("r", i)
		wrong, limited := 0, 0
		for n := range 40 {
			switch err := try(clients[n%2], roomID, n); {
			case errors.Is(err, room.ErrWrongPassword):
				wrong++
			case errors.Is(err, room.ErrRateLimited):
				limited++
			default:
				t.Fatalf("%s try %d: %v", roomID, n, err)
			}
		}
		if wrong != room.PasswordGuessBurst || limited != 40-wrong {
			t.Fatalf("%s: %d tries checked, %d limited over two members: want one bucket (%d checked)", roomID, wrong, limited, room.PasswordGuessBurst)
		}
	}
	// 3 s on, every bucket is 7 s from its next try: both members say so.
	nowMs.Add(3000)
	for i := range rooms {
		for k, c := range clients {
			err := try(c, fmt.Sprint("r", i), 100+k)
			d, ok := errclass.RetryAfterOf(err)
			if !errors.Is(err, room.ErrRateLimited) || !ok || d != room.PasswordGuessEvery-3*time.Second {
				t.Fatalf("r%d through member %d: %v, wait %v (hint %v), want %v", i, k, err, d, ok, room.PasswordGuessEvery-3*time.Second)
			}
		}
	}
}
