// Package loopserve serves an HTTP handler on a loopback address only:
// the listener, the serving goroutine and a bounded Close that the test
// and --dev fakes of outside services (imfake, trtcfake) share.
package loopserve
