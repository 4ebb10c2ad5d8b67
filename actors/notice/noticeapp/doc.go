// Package noticeapp is the notice role's assembly (seed 003's
// internal/app): from opened stores, a publisher, an optional MQ subscriber
// and a list of notice modules (Deps.Modules: walletnotice.App,
// roomnotice.App, ...) it starts each module's worker under the process's
// supervisor and the consumer groups modules ask for, and stops them in
// order (consumers, then workers) before the process closes its stores. It
// knows no module by name: a new notice source is its own package with an
// App constructor plus one entry in the list the process passes. It opens
// nothing itself (the process picks memdb or MySQL, fake or real IM,
// JetStream), holds no notice rules (those are actors/notice and its
// modules), and must not import a store backend, a module package, grpcapi
// or cmd.
package noticeapp
