// Command roomctl is the client, operations and benchmark tool for
// roomcell: one subcommand per RPC (human output by default, --json for
// scripts, errors included), operator commands (outbox, wallet, notice,
// cluster) and `roomctl bench`.
//
// A subcommand is one register(&command{...}) call in the file of its
// area: its name ("outbox list": group words, then the command), a one-line
// usage, its flags (require marks the ones it cannot run without, so
// roomctl says "--user is required" before any RPC) and its run func.
// main.go builds the cobra tree from these: groups list their own
// subcommands, help and shell completion come with it, a bad flag or
// argument prints the error and the usage and exits 2, a failed RPC exits 1.
//
// roomctl talks to roomcell only over gRPC and must not import server
// packages other than the generated API (and grpcapi's method classes).
package main
