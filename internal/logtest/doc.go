// Package logtest owns test-only helpers for reading what code logged
// (a goroutine-safe log sink). Production code must not import it.
package logtest
