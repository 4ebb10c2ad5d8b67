package buildinfo

import (
	"runtime/debug"
)

// Version is the release; set with -ldflags -X (see the package doc).
var Version = "dev"

// String is Version, then the VCS revision (with "(modified)" for a
// dirty tree) and the Go version when the build recorded them.
func String() string {
	return format(Version, debug.ReadBuildInfo)
}

func format(v string, read func() (*debug.BuildInfo, bool)) string {
	if v == "" {
		v = "dev"
	}
	bi, ok := read()
	if !ok {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		v += " " + rev + modified
	}
	return v + " " + bi.GoVersion
}
