// Command roomcell is the server: it loads configuration (or the embedded
// dev defaults with --dev), builds the stores, IM publisher, wallet and
// cluster member for the roles it runs, serves gRPC and the ops HTTP
// endpoints, and shuts down in the order of ARCHITECTURE.md. It holds
// wiring and lifecycle only; domain logic lives in actors/ and persistence/.
package main
