// Package logthrottle provides a slog.Handler that writes a repeated
// line, at any level, once per interval with a count, so an outage that
// fails every command (store or IM down: thousands of identical lines a
// second) costs a few lines instead of a disk. It wraps any handler and knows
// nothing about roomcell; it must not drop a record that is not a repeat.
package logthrottle
