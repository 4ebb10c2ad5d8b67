package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/hyapp/roomcell/errclass"
)

// Room password: JoinRoom of a room with a password asks for it, except
// of the owner and the admins (a ban still holds for anyone). The room
// keeps a verifier, never the password: HMAC-SHA256 under the node's
// room.password_key of a per-room random salt and the password. The grain
// computes it at the edge (SetRoomPassword: a fresh salt and its MAC;
// JoinRoom: the MAC of the offered password under the room's salt), so
// Decide stays pure and compares in constant time, and a replay reads
// the verifier from the event. The verifier is in the room's events (its
// log and what clients read of it): without the key it tells nothing, so
// the key must stay secret and be the same on every node.
const (
	CmdSetRoomPassword = "SetRoomPassword"
	MaxPasswordLen     = 64 // bytes
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
	return []Event{RoomPasswordChanged{Verifier: Verifier{Salt: cmd.PasswordSaltNew, MAC: cmd.PasswordMAC}, OperatorUserID: cmd.UserID}}, nil
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

// RoomPasswordChanged: the room has the password of Verifier now; a zero
// Verifier removes it. Clients read only whether there is one.
type RoomPasswordChanged struct {
	Verifier       `json:"verifier,omitzero"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomPasswordChanged) EventType() string { return TypeRoomPasswordChanged }
func (e RoomPasswordChanged) apply(s *State) {
	if !e.Verifier.set() && s.Extra == nil {
		return
	}
	s.mx().Password = e.Verifier
}
