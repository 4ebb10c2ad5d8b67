package errclass

import (
	"errors"
	"fmt"
	"strings"
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

// New declares the error of code, in the class and with the message its
// row of errors.json gives ("<class text>: <message>"; args fill the
// message's template). A code outside the table, declared twice, or with
// arguments its template does not take panics at start, so two errors
// can never share a code and no text drifts from the table.
func New(code Code, args ...any) error {
	row, ok := table[code]
	if !ok {
		panic(fmt.Sprintf("errclass: code %d is not in the code table", code))
	}
	if _, taken := registry[code]; taken {
		panic(fmt.Sprintf("errclass: code %s (%d) declared twice", code, code))
	}
	class := FromName(row.Class)
	if class == nil {
		panic(fmt.Sprintf("errclass: code %s has no class %q", code, row.Class))
	}
	msg := row.Message
	if len(args) > 0 {
		msg = fmt.Sprintf(row.Message, args...)
	}
	if strings.Contains(msg, "%!") {
		panic(fmt.Sprintf("errclass: code %s: arguments %v do not fit its message %q", code, args, row.Message))
	}
	e := &coded{code: code, class: class, text: class.Error() + ": " + msg}
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
