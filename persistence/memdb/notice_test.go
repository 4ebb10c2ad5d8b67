package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestNoticeStore(t *testing.T) {
	storetest.RunNoticeStore(t, func(t *testing.T) notice.Store {
		s := NewNoticeStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
