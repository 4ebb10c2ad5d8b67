package roomgrain

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// The password guesses one user may make, per room on this node: a
// burst of passwordGuessBurst wrong passwords, then one every
// passwordGuessEvery. A try over the bucket is refused (RATE_LIMITED,
// with the wait) before the password is looked at, so a guesser learns
// nothing from it.
const (
	passwordGuessBurst = 5
	passwordGuessEvery = 10 * time.Second
	// maxGuessBuckets bounds the buckets kept: past it, the full ones
	// (nobody guessed lately) are dropped.
	maxGuessBuckets = 10_000
)

// guesses are the password-guess buckets of this node's rooms, by
// app/room/user. One per node (Deps), so a room passivated and activated
// again does not hand its guessers fresh buckets. Only the room's grain
// checks them, and a room has one grain in the cluster: every try
// reaches the same bucket whatever node the caller entered by, and the
// refusal's exact wait crosses back (RoomError.retry_after_ms). A room
// that moves to another node (failover, rebalance) starts its guessers
// with fresh buckets there.
type guesses struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newGuesses() *guesses { return &guesses{buckets: map[string]*rate.Limiter{}} }

func (g *guesses) bucket(key string, now time.Time) *rate.Limiter {
	b := g.buckets[key]
	if b == nil {
		if len(g.buckets) >= maxGuessBuckets {
			for k, old := range g.buckets {
				if old.TokensAt(now) >= passwordGuessBurst {
					delete(g.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(rate.Every(passwordGuessEvery), passwordGuessBurst)
		g.buckets[key] = b
	}
	return b
}

// check refuses a try when the user's bucket is empty, with the wait.
func (g *guesses) check(key string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.bucket(key, now)
	if b.TokensAt(now) >= 1 {
		return nil
	}
	wait := time.Duration((1 - b.TokensAt(now)) * float64(passwordGuessEvery))
	return errclass.WithRetryAfter(room.ErrRateLimited, wait)
}

// wrong spends a token of the user's bucket on a wrong password.
func (g *guesses) wrong(key string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bucket(key, now).AllowN(now, 1)
}

// passwordEdge is the grain's part of a password (room/password.go): it
// turns the password a command carries into what Decide compares, and
// drops the password itself, before anything is decided or logged.
// guessKey is set for a JoinRoom that must pass the room's password.
func (g *grain) passwordEdge(cmd *room.Command) (guessKey string, err error) {
	password := cmd.Password
	cmd.Password = ""
	key := []byte(g.deps.Config.PasswordKey)
	switch cmd.Type {
	case room.CmdSetRoomPassword:
		if cmd.ClearPassword || password == "" {
			return "", nil
		}
		if len(key) == 0 {
			return "", room.ErrPasswordsOff
		}
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return "", errclass.Errorf(errclass.Unavailable, "password salt: %v", err)
		}
		cmd.PasswordSaltNew = hex.EncodeToString(salt)
		cmd.PasswordMAC = room.PasswordMAC(key, cmd.PasswordSaltNew, password)
	case room.CmdJoinRoom:
		if !g.state.HasPassword() || g.state.IsAdmin(cmd.UserID) || g.state.IsMember(cmd.UserID) {
			return "", nil
		}
		guessKey = g.identity + "/" + cmd.UserID
		if err := g.deps.guesses.check(guessKey, g.deps.Clock()); err != nil {
			return "", err
		}
		if password != "" && len(key) > 0 {
			cmd.PasswordMAC = room.PasswordMAC(key, g.state.PasswordSalt(), password)
		}
	}
	return guessKey, nil
}
