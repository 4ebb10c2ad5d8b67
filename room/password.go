package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hyapp/roomcell/errclass"
)

// Room password: JoinRoom of a room with a password asks for it, except
// of the owner and the admins (a ban still holds for anyone). The room
// keeps a verifier, never the password: HMAC-SHA256 under the node's
// room.password_key of a per-room random salt and the password. The grain
// computes it at the edge (SetRoomPassword: a fresh salt and its MAC;
// JoinRoom: the MAC of the offered password under the room's salt), so
// Decide stays pure and compares in constant time. The verifier is never
// in an event: RoomPasswordChanged says only that a password was set (or
// removed), and the verifier travels beside the event, sealed
// (SealedOf): the grain stores it in the command log row, apart from the
// row's events, and attaches it again when it replays the row (Unseal),
// so replay rebuilds the ability to check. Nothing that reads events
// (IM, MQ, ListRoomEvents, WatchRoom, replies) ever sees it. The key must
// stay secret and be the same on every node.
const (
	CmdSetRoomPassword = "SetRoomPassword"
	MaxPasswordLen     = 64 // bytes
)

// The password guesses one user may make in one room: a burst of
// PasswordGuessBurst wrong passwords, then one every PasswordGuessEvery.
// A try over the bucket is refused (RATE_LIMITED, with the wait) before
// the password is looked at, so a guesser learns nothing from it. The
// buckets are the node's wiring's (the grain is handed them): in Redis
// on a cluster, so they follow a room to whichever node hosts it.
const (
	PasswordGuessBurst = 5
	PasswordGuessEvery = 10 * time.Second
)

var (
	ErrWrongPassword = ruleErr(errclass.CodeWrongPassword)
	ErrPasswordsOff  = ruleErr(errclass.CodePasswordsOff)
)

// Verifier is a room's password check: Salt and MAC hex encoded. The
// zero value is no password.
type Verifier struct {
	Salt string `json:"salt,omitempty"`
	MAC  string `json:"mac,omitempty"`
}

func (v Verifier) set() bool { return v.MAC != "" }

// PasswordMAC is the verifier of password under key and salt.
func PasswordMAC(key []byte, salt, password string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(salt))
	m.Write([]byte{0}) // the salt is hex: no NUL in it, so the split is unambiguous
	m.Write([]byte(password))
	return hex.EncodeToString(m.Sum(nil))
}

// PasswordSalt is the room's current salt ("" for none): what the grain
// computes a JoinRoom's proof with.
func (s State) PasswordSalt() string { return s.x().Password.Salt }

// HasPassword reports whether JoinRoom asks for a password.
func (s State) HasPassword() bool { return s.x().Password.set() }

func checkPassword(cmd Command) error {
	if cmd.ClearPassword {
		if cmd.Password != "" {
			return errclass.Invalidf("password must be empty with clear")
		}
		return nil
	}
	// The grain replaces the password by its verifier before Decide; the
	// check runs on the request (CheckClientCommand) and then on that.
	if cmd.Password == "" && cmd.PasswordMAC == "" {
		return errclass.Invalidf("password is required (or clear)")
	}
	if len(cmd.Password) > MaxPasswordLen || !utf8.ValidString(cmd.Password) {
		return errclass.Invalidf("password must be UTF-8 of at most %d bytes", MaxPasswordLen)
	}
	return nil
}

// checkJoinPassword bounds what a JoinRoom may carry.
func checkJoinPassword(cmd Command) error {
	if len(cmd.Password) > MaxPasswordLen {
		return errclass.Invalidf("password is longer than %d bytes", MaxPasswordLen)
	}
	return nil
}

// decideSetPassword: an operator sets (a fresh verifier) or clears it;
// clearing none is a no-op. No verifier with no clear: the node has no
// key (ErrPasswordsOff).
func decideSetPassword(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.ClearPassword {
		if !s.HasPassword() {
			return nil, nil
		}
		return []Event{RoomPasswordChanged{OperatorUserID: cmd.UserID}}, nil
	}
	if cmd.PasswordMAC == "" || cmd.PasswordSaltNew == "" {
		return nil, ErrPasswordsOff
	}
	return []Event{RoomPasswordChanged{Set: true, Sealed: Verifier{Salt: cmd.PasswordSaltNew, MAC: cmd.PasswordMAC}, OperatorUserID: cmd.UserID}}, nil
}

// passwordRefused: the JoinRoom of user must pass the room's password.
func passwordRefused(s State, cmd Command) error {
	if !s.HasPassword() || s.IsAdmin(cmd.UserID) {
		return nil
	}
	want := s.x().Password.MAC
	if cmd.PasswordMAC == "" || !hmac.Equal([]byte(cmd.PasswordMAC), []byte(want)) {
		return ErrWrongPassword
	}
	return nil
}

// RoomPasswordChanged: the room asks for a password now (Set), or no
// longer. Its payload is that and the operator: the verifier is Sealed,
// never encoded with the event.
type RoomPasswordChanged struct {
	Set            bool   `json:"has_password,omitempty"`
	OperatorUserID string `json:"operator_user_id"`
	// Sealed is the new verifier, carried beside the payload (SealedOf,
	// Unseal).
	Sealed Verifier `json:"-"`
	// Legacy is the verifier as events carried it before it was sealed:
	// read from a log written then, never written.
	Legacy Verifier `json:"verifier,omitzero"`
}

// unsealed is the verifier of a set password that came back from the
// log without its sealed part (a row stored without it): no offer
// matches it, so the room admits only its owner and admins (fail
// closed) until a password is set again.
var unsealed = Verifier{MAC: "unsealed"}

func (RoomPasswordChanged) EventType() string { return TypeRoomPasswordChanged }
func (e RoomPasswordChanged) apply(s *State) {
	v := e.Sealed
	switch {
	case e.Legacy.set():
		v = e.Legacy
	case e.Set && !v.set():
		v = unsealed
	}
	if !v.set() && s.Extra == nil {
		return
	}
	s.mx().Password = v
}

// SealedOf is what a command's events carry beside their payloads: the
// verifier of a password they set, encoded; nil for none. The grain
// stores it with the command's log row, never with the events.
func SealedOf(events []Event) []byte {
	for _, ev := range events {
		if e, ok := ev.(RoomPasswordChanged); ok && e.Sealed.set() {
			b, _ := json.Marshal(e.Sealed) // two strings: cannot fail
			return b
		}
	}
	return nil
}

// Unseal attaches a log row's sealed part (SealedOf) to the events
// decoded from it. A row without one leaves a set password unsealed
// (fail closed, see unsealed).
func Unseal(events []Event, sealed []byte) error {
	if len(sealed) == 0 {
		return nil
	}
	var v Verifier
	if err := json.Unmarshal(sealed, &v); err != nil {
		return fmt.Errorf("decode sealed verifier: %w", err)
	}
	for i, ev := range events {
		if e, ok := ev.(RoomPasswordChanged); ok && e.Set {
			e.Sealed = v
			events[i] = e
			return nil
		}
	}
	return errors.New("sealed verifier without the RoomPasswordChanged it belongs to")
}
