// Package logthrottle provides a slog.Handler that writes a repeated
// identical error once per interval with a count, so an outage that fails
// every command (store down: thousands of identical WARN lines a second)
// costs a few lines instead of a disk. It wraps any handler and knows
// nothing about roomcell; it must not drop a record that is not a repeat.
package logthrottle
