package storetest

import "testing"

// contractCase is one subtest of a contract suite over a store of type S.
type contractCase[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// runContract runs each case as a subtest on a fresh store from newStore.
func runContract[S any](t *testing.T, newStore func(t *testing.T) S, cases []contractCase[S]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}
