package configs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse feeds any bytes to the config loader, seeded with every
// shipped config and seed 003's shapes: it never panics, and a config it
// accepts is one Validate accepts, whose defaults are already applied
// (applying them again changes nothing).
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"*.yaml", "testdata/*.yaml"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("grpc: {addr: 1}\n"))
	f.Add([]byte("room: {mic_seats: -1}\n"))
	f.Add([]byte("gifts: [{id: \"\", price: -5}]\n"))
	f.Add([]byte("rocketmq: {enabled: true}\nnotice: {mq: {kind: nats}}\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate refuses: %v", err)
		}
		// A shallow copy: a default written into a shared slice element
		// would go unseen, one set on a field or pointer is caught.
		again := c
		again.setDefaults()
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("defaults applied twice differ:\n%+v\n%+v", c, again)
		}
	})
}
