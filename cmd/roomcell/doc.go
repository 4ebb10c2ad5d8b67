// Command roomcell is the server: it loads configuration (or the embedded
// dev defaults with --dev), builds the stores, IM publisher, wallet and
// cluster member for the roles it runs, serves gRPC and the ops HTTP
// endpoints, and shuts down in seed 000's order (App.Shutdown lists the
// steps). It holds wiring and lifecycle only; domain logic lives in actors/
// and persistence/. main.go is the command line (cobra: serve, migrate,
// --version, completion).
package main
