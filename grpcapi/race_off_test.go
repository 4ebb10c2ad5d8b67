//go:build !race

package grpcapi

// raceBuild is true under the race detector, which slows every request
// several times: timed assertions compare with a baseline then.
const raceBuild = false
