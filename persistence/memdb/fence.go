package memdb

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

const tableFences = "room_fences"

// fence is one room's epoch fence: the highest ownership epoch that wrote
// to or claimed the room.
type fence struct {
	AppCode string
	RoomID  string
	Epoch   int64
}

// roomFencesTable holds *fence rows, one per room that was ever fenced.
func roomFencesTable() *memdb.TableSchema {
	return table(tableFences, index(indexID, true, strField("AppCode"), strField("RoomID")))
}

// raiseFence checks epoch against the room's fence and raises the fence to
// it, inside the caller's write transaction. Epoch 0 is not fenced.
func raiseFence(txn *memdb.Txn, key persistence.RoomKey, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	cur, err := fenceOf(txn, key, epoch)
	if err != nil || cur == epoch {
		return err
	}
	return txn.Insert(tableFences, &fence{AppCode: key.AppCode, RoomID: key.RoomID, Epoch: epoch})
}

// checkFence is raiseFence's check alone: it writes nothing.
func checkFence(txn *memdb.Txn, key persistence.RoomKey, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	_, err := fenceOf(txn, key, epoch)
	return err
}

// fenceOf returns the room's fence (0: none) and refuses an epoch below
// it (or a negative one).
func fenceOf(txn *memdb.Txn, key persistence.RoomKey, epoch int64) (int64, error) {
	if epoch < 0 {
		return 0, fmt.Errorf("%w: negative epoch %d", errInvalid, epoch)
	}
	raw, err := txn.First(tableFences, indexID, key.AppCode, key.RoomID)
	if err != nil || raw == nil {
		return 0, err
	}
	cur := raw.(*fence).Epoch
	if cur > epoch {
		return 0, fmt.Errorf("epoch %d is below the room's fence %d (the room has a newer owner): %w", epoch, cur, persistence.ErrConflict)
	}
	return cur, nil
}

// FenceRoom implements persistence.RoomStore.
func (s *Store) FenceRoom(ctx context.Context, key persistence.RoomKey, epoch int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if epoch == 0 {
		return nil
	}
	if key.AppCode == "" || key.RoomID == "" {
		return fmt.Errorf("%w: app_code and room_id are required", errInvalid)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := raiseFence(txn, key, epoch); err != nil {
		return fmt.Errorf("memdb: fence %s: %w", key, err)
	}
	txn.Commit()
	return nil
}
