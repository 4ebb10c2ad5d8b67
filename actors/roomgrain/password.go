package roomgrain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hyapp/roomcell/persistence"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// PasswordGuesses are the password-guess buckets of rooms, by room and
// user (room.PasswordGuessBurst, room.PasswordGuessEvery), a service the
// node's wiring hands the grains: in Redis on a cluster
// (persistence/redis.Guesses), so a room that moves to another node keeps
// its guessers' buckets; in memory on a single node (memdb.Guesses).
// Only the room's grain checks them, and a room has one grain in the
// cluster: the refusal's exact wait crosses back to the caller's node
// (RoomError.retry_after_ms).
type PasswordGuesses interface {
	// Check refuses a try when the user's bucket is empty: room.ErrRateLimited
	// with the wait (errclass.WithRetryAfter); any other error: the
	// buckets could not be read.
	Check(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error
	// Wrong spends a token of the user's bucket on a wrong password.
	Wrong(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error
}

// checkGuess asks the room's guess buckets whether user may try a
// password now. Without buckets, or when they do not answer, the try is
// refused (unavailable): a password is never checked unlimited.
func (g *grain) checkGuess(user string) error {
	if g.deps.Guesses == nil {
		return fmt.Errorf("%w: room passwords need the password-guess buckets, which this node was not given", errclass.Unavailable)
	}
	ctx, cancel := g.storeCtx()
	defer cancel()
	err := g.deps.Guesses.Check(ctx, g.key(), user, g.deps.Clock())
	if err != nil && !errors.Is(err, room.ErrRateLimited) {
		g.log.Warn("password guesses not checked", "error", err)
		return fmt.Errorf("%w: password tries cannot be counted now, retry", errclass.Unavailable)
	}
	return err
}

// wrongGuess spends a token of user's bucket.
func (g *grain) wrongGuess(user string) {
	ctx, cancel := g.storeCtx()
	defer cancel()
	if err := g.deps.Guesses.Wrong(ctx, g.key(), user, g.deps.Clock()); err != nil {
		g.log.Warn("wrong password not counted", "error", err)
	}
}

// passwordEdge is the grain's part of a password (room/password.go): it
// turns the password a command carries into what Decide compares, and
// drops the password itself, before anything is decided or logged.
// guessKey (the user) is set for a JoinRoom that must pass the room's
// password.
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
		guessKey = cmd.UserID
		if err := g.checkGuess(guessKey); err != nil {
			return "", err
		}
		if password != "" && len(key) > 0 {
			cmd.PasswordMAC = room.PasswordMAC(key, g.state.PasswordSalt(), password)
		}
	}
	return guessKey, nil
}
