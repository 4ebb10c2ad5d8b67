package room

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hyapp/roomcell/errclass"
)

// Room custom info: an app's own key/value pairs on a room (a theme, a
// game's state, a pinned link), set and deleted by key by the owner or an
// admin, shown by GetRoom and told with one event per change carrying
// only the keys that changed. Bounded so a room's snapshot and its
// GetRoom stay small whatever a client sends.
const (
	MaxCustomKeys     = 32
	MaxCustomValueLen = 2048      // bytes
	MaxCustomInfoLen  = 16 * 1024 // bytes of keys and values together
)

// CmdSetRoomCustomInfo sets and deletes custom info keys.
const CmdSetRoomCustomInfo = "SetRoomCustomInfo"

var (
	ErrTooManyCustomKeys  = ruleErr(errclass.CodeTooManyCustomKeys, MaxCustomKeys)
	ErrCustomInfoTooLarge = ruleErr(errclass.CodeCustomInfoTooLarge, MaxCustomInfoLen)
)

// CustomInfo returns the room's custom info (read only).
func (s State) CustomInfo() map[string]string { return s.x().CustomInfo }

// checkCustomInfo: the request alone. A key is an id; a value free text
// (UTF-8, line breaks allowed); one request names each key once.
func checkCustomInfo(cmd Command) error {
	if len(cmd.CustomSet) == 0 && len(cmd.CustomDelete) == 0 {
		return errclass.Invalidf("set or delete_keys is required")
	}
	if len(cmd.CustomSet) > MaxCustomKeys || len(cmd.CustomDelete) > MaxCustomKeys {
		return errclass.Invalidf("at most %d keys in set and %d in delete_keys, got %d and %d", MaxCustomKeys, MaxCustomKeys, len(cmd.CustomSet), len(cmd.CustomDelete))
	}
	for _, k := range slices.Sorted(maps.Keys(cmd.CustomSet)) {
		if err := checkID("set key", k); err != nil {
			return err
		}
		if len(cmd.CustomSet[k]) > MaxCustomValueLen {
			return errclass.Invalidf("set[%s] is longer than %d bytes", k, MaxCustomValueLen)
		}
		if err := checkFreeText("set["+k+"]", cmd.CustomSet[k], MaxCustomValueLen, true); err != nil {
			return err
		}
	}
	for i, k := range cmd.CustomDelete {
		if err := checkID(fmt.Sprintf("delete_keys[%d]", i), k); err != nil {
			return err
		}
		if _, both := cmd.CustomSet[k]; both {
			return errclass.Invalidf("delete_keys[%d] %q is in set too", i, k)
		}
	}
	return nil
}

// decideSetCustomInfo: an operator; the event carries the keys whose
// value changes and the present keys deleted; none is a no-op. The room's
// limits are checked on the info after the change, so a change that
// frees room (deletes) and fills it in one request passes.
func decideSetCustomInfo(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	cur := s.CustomInfo()
	e := RoomCustomInfoChanged{OperatorUserID: cmd.UserID}
	for k, v := range cmd.CustomSet {
		if old, ok := cur[k]; !ok || old != v {
			if e.Set == nil {
				e.Set = map[string]string{}
			}
			e.Set[k] = v
		}
	}
	for _, k := range cmd.CustomDelete {
		if _, ok := cur[k]; ok && !slices.Contains(e.Deleted, k) {
			e.Deleted = append(e.Deleted, k)
		}
	}
	if e.Set == nil && e.Deleted == nil {
		return nil, nil
	}
	slices.Sort(e.Deleted)
	after := maps.Clone(cur)
	if after == nil {
		after = map[string]string{}
	}
	e.applyTo(after)
	if len(after) > MaxCustomKeys {
		return nil, ErrTooManyCustomKeys
	}
	size := 0
	for k, v := range after {
		size += len(k) + len(v)
	}
	if size > MaxCustomInfoLen {
		return nil, ErrCustomInfoTooLarge
	}
	return []Event{e}, nil
}

// RoomCustomInfoChanged: the keys of Set now have these values, the keys
// of Deleted are gone; the other keys are as they were.
type RoomCustomInfoChanged struct {
	Set            map[string]string `json:"set,omitempty"`
	Deleted        []string          `json:"deleted,omitempty"`
	OperatorUserID string            `json:"operator_user_id"`
}

func (RoomCustomInfoChanged) EventType() string { return TypeRoomCustomInfoChanged }
func (e RoomCustomInfoChanged) apply(s *State) {
	x := s.mx()
	if x.CustomInfo == nil {
		x.CustomInfo = map[string]string{}
	}
	e.applyTo(x.CustomInfo)
}

func (e RoomCustomInfoChanged) applyTo(m map[string]string) {
	maps.Copy(m, e.Set)
	for _, k := range e.Deleted {
		delete(m, k)
	}
}
