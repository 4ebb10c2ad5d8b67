package errclass_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"
)

func TestEveryClassHasOneNameAndBack(t *testing.T) {
	all := []error{errclass.Invalid, errclass.NotFound, errclass.Exists, errclass.Precondition,
		errclass.Permission, errclass.Conflict, errclass.Unavailable, errclass.Exhausted}
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

func TestCodedErrors(t *testing.T) {
	// Wrapping keeps the code; a received text keeps the error.
	e := errclass.New(errclass.CodeKickAdmin)
	if got := errclass.CodeOf(fmt.Errorf("kick: %w", e)); got != errclass.CodeKickAdmin {
		t.Fatalf("CodeOf wrapped = %d", got)
	}
	if e.Error() != "permission denied: only the owner may kick an admin" {
		t.Fatalf("text %q", e.Error())
	}
	if back := errclass.FromWire(errclass.CodeKickAdmin, errclass.NamePermission, e.Error()); back != e {
		t.Fatalf("same text came back as %v", back)
	}
	if back := errclass.FromWire(errclass.CodeKickAdmin, "", "other words"); !errors.Is(back, e) || !errors.Is(back, errclass.Permission) || back.Error() != "other words" {
		t.Fatalf("reworded came back as %v", back)
	}
	if back := errclass.FromWire(0, errclass.NamePermission, e.Error()); errors.Is(back, e) || !errors.Is(back, errclass.Permission) {
		t.Fatalf("no code came back as %v", back)
	}
	if errclass.Lookup(0) != nil || errclass.FromCode(0, "x") != nil {
		t.Fatal("code 0 names an error")
	}
	names := map[string]bool{}
	for _, c := range errclass.Codes() {
		if c.String() == "" || names[c.String()] {
			t.Fatalf("code %d has no name or a name taken twice: %q", c, c)
		}
		names[c.String()] = true
	}
	// The class and the text are the table's.
	if row, ok := errclass.Info(errclass.CodeKickAdmin); !ok || row.Class != errclass.Name(e) || e.Error() != errclass.Permission.Error()+": "+row.Message {
		t.Fatalf("row %+v, error %q in class %s", row, e, errclass.Name(e))
	}
	// A template fills with the declaration's arguments.
	if e := errclass.New(errclass.CodeTooManyAdmins, 7); e.Error() != "failed precondition: the room already has 7 admins" {
		t.Fatalf("templated text %q", e.Error())
	}
	// A code outside the table, or declared twice, stops the start.
	for name, declare := range map[string]func(){
		"outside the table": func() { errclass.New(99999) },
		// This test binary declares no domain's errors: the first
		// declaration takes the code, the second must fail.
		"twice": func() {
			errclass.New(errclass.CodeSeatTaken)
			errclass.New(errclass.CodeSeatTaken)
		},
		// The table's message takes no argument: one passed would
		// change the text the table says.
		"with arguments its message does not take": func() {
			errclass.New(errclass.CodeSeatLocked, 3)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("declaring a code %s did not panic", name)
				}
			}()
			declare()
		}()
	}
}

// A retry-after rides on an error without changing its class or code.
func TestRetryAfter(t *testing.T) {
	base := errclass.Errorf(errclass.Exhausted, "slow down")
	err := fmt.Errorf("wrapped: %w", errclass.WithRetryAfter(base, 1500*time.Millisecond))
	if d, ok := errclass.RetryAfterOf(err); !ok || d != 1500*time.Millisecond {
		t.Fatalf("RetryAfterOf = %v, %v", d, ok)
	}
	if !errors.Is(err, errclass.Exhausted) || errclass.Name(err) != errclass.NameExhausted {
		t.Fatalf("class lost: %v", errclass.Name(err))
	}
	if _, ok := errclass.RetryAfterOf(base); ok {
		t.Fatal("an error without a retry-after has one")
	}
}
