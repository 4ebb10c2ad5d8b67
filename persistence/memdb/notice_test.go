package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestNoticeStore(t *testing.T) {
	storetest.RunNoticeStore(t, func(t *testing.T) persistence.NoticeStore {
		s := NewNoticeStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
