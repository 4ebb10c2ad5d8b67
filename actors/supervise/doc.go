// Package supervise holds what every supervised worker actor of roomcell
// shares: the poller shell (StartPoller: a polling worker is just a round
// function returning its own result type; the shell owns the tick, the
// restart, the kick, RunNow and the stop with wait, and *Poller[T] is the
// handle every worker's Start returns), a Supervisor parent (`workers`) that spawns its children
// under a restart strategy — NewWorkerSupervisor restarts them after any
// number of panics with a capped exponential backoff, counts restarts in
// roomcell_worker_restarts_total{worker} and lists workers waiting for a
// restart in Health (exported as roomcell_workers_down; not part of /readyz) — LogEvents which logs each
// *actor.SupervisorEvent with the panic value and stack (the library only
// logs "[ACTOR] Recovering" at Info), StopAndWait which poisons an actor and
// waits for its termination for longer than PoisonFuture's fixed 10 s, and
// Ticker, the self-rescheduling timer of polling actors that cannot pile up
// ticks across restarts. It knows nothing about rooms, stores or IM and must
// not import any other roomcell package.
package supervise
