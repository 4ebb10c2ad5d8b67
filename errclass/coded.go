package errclass

import (
	"errors"
	"fmt"
)

// coded is an error with a code: a domain's sentinel (room.ErrSeatTaken,
// wallet.ErrInsufficientBalance), one per row of the code table.
type coded struct {
	code  Code
	class error
	text  string
}

func (e *coded) Error() string { return e.text }
func (e *coded) Unwrap() error { return e.class }

// registry holds the error of each code, filled by New as domains declare
// their sentinels.
var registry = map[Code]*coded{}

// New declares the error of code: in class, with the text
// "<class text>: <text>". A code outside the table or declared twice
// panics at start, so two errors can never share a code.
func New(code Code, class error, text string) error {
	if code.String() == "" {
		panic(fmt.Sprintf("errclass: code %d is not in the code table", code))
	}
	if _, taken := registry[code]; taken {
		panic(fmt.Sprintf("errclass: code %s (%d) declared twice", code, code))
	}
	e := &coded{code: code, class: class, text: class.Error() + ": " + text}
	registry[code] = e
	return e
}

// CodeOf returns the code of the coded error err is or wraps, 0 when none.
func CodeOf(err error) Code {
	var c *coded
	if errors.As(err, &c) {
		return c.code
	}
	return 0
}

// received is a coded error that came from another process with a text of
// its own (a detail, or another version's wording): its text as received,
// and errors.Is matches the local error of its code and that error's class.
type received struct {
	err  *coded
	text string
}

func (e *received) Error() string { return e.text }
func (e *received) Unwrap() error { return e.err }

// Lookup returns the error declared with code, nil when none is.
func Lookup(code Code) error {
	if e, ok := registry[code]; ok {
		return e
	}
	return nil
}

// FromCode returns the error of code as received with text: the declared
// error itself when the text is its own, else an error with text that
// matches it under errors.Is. nil for a code this process does not know.
func FromCode(code Code, text string) error {
	e, ok := registry[code]
	switch {
	case !ok:
		return nil
	case text == e.text:
		return e
	}
	return &received{err: e, text: text}
}

// FromWire rebuilds an error received from another process: by its code
// when it has one this process knows, else by its class name (Define),
// else as plain text (an internal error).
func FromWire(code Code, className, text string) error {
	if err := FromCode(code, text); err != nil {
		return err
	}
	if c := FromName(className); c != nil {
		return Define(c, text)
	}
	return errors.New(text)
}

// Invalidf returns an Invalid error with a formatted detail: bad input,
// named by its field.
func Invalidf(format string, args ...any) error { return Errorf(Invalid, format, args...) }
