// Command roomctl is the client, operations and benchmark tool for
// roomcell: one subcommand per RPC (human output by default, --json for
// scripts), operator commands (outbox, wallet, notice, cluster) and
// `roomctl bench`. Each file registers its own subcommands with register;
// it talks to roomcell only over gRPC and must not import server packages
// other than the generated API.
package main
