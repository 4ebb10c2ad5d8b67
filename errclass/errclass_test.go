package errclass_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hyapp/roomcell/errclass"
)

func TestEveryClassHasOneNameAndBack(t *testing.T) {
	all := []error{errclass.Invalid, errclass.NotFound, errclass.Exists, errclass.Precondition,
		errclass.Permission, errclass.Conflict, errclass.Unavailable}
	seen := map[string]bool{}
	for _, c := range all {
		name := errclass.Name(c)
		if name == errclass.NameInternal || seen[name] {
			t.Fatalf("class %q has name %q (internal or taken twice)", c, name)
		}
		seen[name] = true
		if back := errclass.FromName(name); back != c {
			t.Fatalf("FromName(%q) = %v, want %v", name, back, c)
		}
	}
	if errclass.FromName(errclass.NameInternal) != nil || errclass.FromName("teapot") != nil {
		t.Fatal("FromName invented a class for internal or an unknown name")
	}
}

func TestClassesSurviveWrapping(t *testing.T) {
	narrow := errclass.Define(errclass.Precondition, "seat is taken")
	for _, tc := range []struct {
		err  error
		want error
	}{
		{narrow, errclass.Precondition},
		{fmt.Errorf("room r1: %w", narrow), errclass.Precondition},
		{errclass.Errorf(narrow, "seat %d", 3), errclass.Precondition},
		{errclass.Errorf(errclass.Unavailable, "dial: %w", context.DeadlineExceeded), errclass.Unavailable},
		{errors.Join(errors.New("cause"), errclass.Define(errclass.Conflict, "store conflict")), errclass.Conflict},
		{errclass.Define(errclass.NotFound, "room does not exist"), errclass.NotFound},
		{errors.New("bug"), nil},
		{context.Canceled, nil},
		{nil, nil},
	} {
		if got := errclass.Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", narrow), narrow) {
		t.Fatal("a defined sentinel is not matched through wrapping")
	}
	if narrow.Error() != "seat is taken" {
		t.Fatalf("Define changed the text: %q", narrow.Error())
	}
	if got := errclass.Errorf(errclass.Invalid, "count %d", -1).Error(); got != "invalid argument: count -1" {
		t.Fatalf("Errorf text %q", got)
	}
	if errclass.Name(errors.New("bug")) != errclass.NameInternal {
		t.Fatal("an unclassified error is not internal")
	}
}

// An error that carries two classes is in the first of the lookup order,
// whatever order it wraps them in.
func TestTwoClassesResolveByOrder(t *testing.T) {
	a := errors.Join(errclass.Unavailable, errclass.Invalid)
	b := errors.Join(errclass.Invalid, errclass.Unavailable)
	if errclass.Of(a) != errclass.Invalid || errclass.Of(b) != errclass.Invalid {
		t.Fatalf("Of = %v / %v, want invalid for both", errclass.Of(a), errclass.Of(b))
	}
}
