// Package buildinfo is the version both binaries print with --version:
// Version, set at build time with
//
//	go build -ldflags "-X github.com/hyapp/roomcell/internal/buildinfo.Version=v1.2.3"
//
// ("dev" without it; make build sets it from git describe), followed by
// the VCS revision and Go version the toolchain recorded.
package buildinfo
