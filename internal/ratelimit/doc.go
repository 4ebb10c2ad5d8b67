// Package ratelimit limits how fast one user, and one app as a whole, may
// send each class of room command (configs.RateLimitConfig): a token
// bucket per (class, app, user) and one per (class, app), this node's
// share of the cluster-wide rates. A call is checked against its user's
// bucket first, then its app's; a call refused by either takes nothing
// from the other, so a client far over its own limit spends none of its
// app's, and the app's other users are not slowed by it. A refusal says
// how long until the call would be let through (the retry-after).
//
// Buckets are in memory, per node: limits hold to within the documented
// tolerance across nodes (configs.RateLimitConfig), not exactly. Idle
// buckets (full again) are dropped when a shard grows past its bound, so
// memory follows the users active in the last seconds.
package ratelimit
