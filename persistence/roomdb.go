package persistence

import (
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/errclass"
)

// RoomDBError is an error of one room database of the shard map, named
// by its key. The key is configuration, not an address, so the gRPC layer
// may tell a caller which database its rooms wait for (RoomDBOf) without
// reading it back out of the text.
type RoomDBError struct {
	Key string
	Err error
}

// InRoomDB says err happened in the room database of key; nil stays nil.
func InRoomDB(key string, err error) error {
	if err == nil {
		return nil
	}
	return &RoomDBError{Key: key, Err: err}
}

func (e *RoomDBError) Error() string { return fmt.Sprintf("room database %q: %v", e.Key, e.Err) }
func (e *RoomDBError) Unwrap() error { return e.Err }

// RoomDBMetaKey is the metadata key (errclass.WithMeta) that names the
// room database of an error received from another member, where the
// RoomDBError itself did not cross.
const RoomDBMetaKey = "room_db"

// RoomDBOf returns the key of the room database err happened in, when it
// names one (as a RoomDBError, or as received from another member).
func RoomDBOf(err error) (string, bool) {
	var e *RoomDBError
	if errors.As(err, &e) {
		return e.Key, true
	}
	key, ok := errclass.MetaOf(err)[RoomDBMetaKey]
	return key, ok
}
