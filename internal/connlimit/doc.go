// Package connlimit wraps a net.Listener so it holds at most a number of
// connections in total and per client address (the IP, without the
// port): a connection past the per-address cap is closed as soon as it
// is accepted (roomcell_listener_refused_total{listener,limit}); at the
// total cap, a newcomer from an address holding fewer than the address
// holding the most gets the slot of that address's least recently active
// connection (roomcell_listener_shed_total{listener}), so a flood from
// many addresses never locks a new client out; the flooding address's own
// newcomers are refused. Both are logged at most once
// per period with the counts since the last line. The open connections are roomcell_listener_connections
// {listener}. It bounds what one client (or a few) can hold of a
// process's file descriptors and memory without a token: idle and age
// limits and keepalive belong to the server on top (grpc keepalive,
// http.Server timeouts). It knows nothing about roomcell and imports no
// other package of it.
package connlimit
