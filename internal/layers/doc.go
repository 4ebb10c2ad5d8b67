// Package layers holds, in its test, the rule of which of this module's
// packages may import which. It has no code of its own.
package layers
