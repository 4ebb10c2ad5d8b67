package directory

import (
	"testing"
	"unsafe"
)

// A room's directory link (with its worker) is 208 bytes at most: a size
// class of Go's allocator, which every active room pays.
func TestLinkFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(link{}); n > 208 {
		t.Errorf("link is %d bytes, over the 208-byte size class", n)
	}
}
