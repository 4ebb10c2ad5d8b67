package errclass

import "sort"

//go:generate go run ./errgen

// Code is an error's stable number. It names one error across processes
// and versions: a room's answer relayed by another node and a remote
// wallet's status carry it, and the receiver finds the error by it, never
// by its text, so rewording an error breaks nothing. errors.json is the
// only list of codes (as nats-server keeps one): the constants and the
// table of codes_gen.go and the client's docs/errors.md are generated
// from it (`make errors`); a code is never renumbered or reused; a
// removed error's code stays retired.
type Code uint32

// Row is one record of errors.json: what a client reads of an error.
type Row struct {
	// Name is the google.rpc.ErrorInfo reason ("SEAT_TAKEN").
	Name string
	// Class is the wire name of the error's class (NameInvalid, ...).
	Class string
	// GRPC is the status code the API answers it with ("FAILED_PRECONDITION").
	GRPC string
	// Retryable: the same request (same command_id) may succeed later.
	Retryable bool
	// Message is the text after the class's, a fmt template when the
	// error's declaration passes arguments.
	Message string
	// Doc is the line docs/errors.md gives it.
	Doc string
	// Metadata are the ErrorInfo metadata keys it carries besides "code".
	Metadata []string
}

// String is the code's name ("SEAT_TAKEN"); "" for a code not in the table.
func (c Code) String() string { return table[c].Name }

// Info returns the code's row of errors.json.
func Info(c Code) (Row, bool) {
	r, ok := table[c]
	return r, ok
}

// Codes lists every code of the table, in order.
func Codes() []Code {
	out := make([]Code, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
