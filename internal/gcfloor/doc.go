// Package gcfloor keeps the garbage collector's heap goal at a floor: a
// process whose live heap is small (tens of MB on a busy command path)
// otherwise collects every few MB allocated, and GC was a fifth of the
// server's CPU on MariaDB. Above the floor GOGC rules as usual,
// and GOMEMLIMIT still caps the heap. It owns the process's GC percent
// while it runs and touches nothing else; it knows nothing about roomcell.
package gcfloor
