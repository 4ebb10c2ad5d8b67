// Package supervise holds the small helpers every supervised worker actor
// of roomcell shares: a Supervisor parent (`workers`) that spawns its
// children under a restart strategy, LogEvents which logs each
// *actor.SupervisorEvent with the panic value and stack (the library only
// logs "[ACTOR] Recovering" at Info), StopAndWait which poisons an actor and
// waits for its termination for longer than PoisonFuture's fixed 10 s, and
// Ticker, the self-rescheduling timer of polling actors that cannot pile up
// ticks across restarts. It knows nothing about rooms, stores or IM and must
// not import any other roomcell package.
package supervise
