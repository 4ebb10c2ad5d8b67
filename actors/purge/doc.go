// Package purge is the per-node retention worker: a poller
// (actors/supervise's shell, under the workers' supervisor) that, every
// retention.interval, runs one round over the tables of
// persistence.PurgeTables. For each table a store on this node holds, it
// takes the table's purge lease (one node purges a table at a time), reads
// the notice cursor the table's rule needs, and deletes in batches of at
// most retention.batch_size rows through persistence.Purger, pausing
// between batches (retention.batch_pause, and the retention.rows_per_second
// rate), so room commands never wait behind it. The rules themselves (what
// may go, what never goes) live in the stores and their contract
// (persistence/retention.go, storetest.RunRetention); this package only
// decides when, how fast and on which node. It also answers the operators'
// status and dry run (grpcapi PurgeAdmin). It must not import grpcapi and
// never writes a table other than through Purger.
package purge
