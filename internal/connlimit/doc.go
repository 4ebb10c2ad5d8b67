// Package connlimit wraps a net.Listener so it holds at most a number of
// connections in total and per client address (the IP, without the
// port): a connection past either cap is closed as soon as it is
// accepted, counted in roomcell_listener_refused_total{listener,limit},
// and logged at most once per period with how many were refused since
// the last line. The open connections are roomcell_listener_connections
// {listener}. It bounds what one client (or a few) can hold of a
// process's file descriptors and memory without a token: idle and age
// limits and keepalive belong to the server on top (grpc keepalive,
// http.Server timeouts). It knows nothing about roomcell and imports no
// other package of it.
package connlimit
