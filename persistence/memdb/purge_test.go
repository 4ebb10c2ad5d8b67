package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestRetentionContract(t *testing.T) {
	storetest.RunRetention(t, func(t *testing.T) storetest.RetentionStores {
		return storetest.RetentionStores{Room: New(), Wallet: NewWalletStore(), Notice: NewNoticeStore(), RoomMQ: New(WithOutboxMQ())}
	})
}

// A go-memdb lease lasts ttl: a holder that never releases (a wedged
// worker) loses the table when its ttl has run.
func TestPurgeLeaseExpires(t *testing.T) {
	s := New()
	if _, held, err := s.AcquirePurgeLease(t.Context(), persistence.PurgeRoomOutbox, "a", 1000, 500); err != nil || !held {
		t.Fatalf("first lease: held=%v err=%v", held, err)
	}
	if _, held, _ := s.AcquirePurgeLease(t.Context(), persistence.PurgeRoomOutbox, "b", 1499, 500); held {
		t.Fatalf("lease taken before its ttl ran out")
	}
	if _, held, _ := s.AcquirePurgeLease(t.Context(), persistence.PurgeRoomOutbox, "b", 1500, 500); !held {
		t.Fatalf("lease not free after its ttl")
	}
}
