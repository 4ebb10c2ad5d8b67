package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.25.0", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		v    string
		read func() (*debug.BuildInfo, bool)
		want string
	}{
		{"v1.2.3", func() (*debug.BuildInfo, bool) { return bi, true }, "v1.2.3 abc123 (modified) go1.25.0"},
		{"", func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{GoVersion: "go1.25.0"}, true }, "dev go1.25.0"},
		{"dev", func() (*debug.BuildInfo, bool) { return nil, false }, "dev"},
	} {
		if got := format(c.v, c.read); got != c.want {
			t.Errorf("format(%q) = %q, want %q", c.v, got, c.want)
		}
	}
}

// Without -ldflags the version is dev (this test binary is built
// without them).
func TestDefaultIsDev(t *testing.T) {
	if Version != "dev" || !strings.HasPrefix(String(), "dev") {
		t.Fatalf("Version %q, String %q; want dev", Version, String())
	}
}

// The -X flag the Makefile passes reaches both binaries' --version.
func TestLdflagsSetVersion(t *testing.T) {
	dir := t.TempDir()
	for _, bin := range []string{"roomcell", "roomctl"} {
		out := filepath.Join(dir, bin)
		build := exec.Command("go", "build", "-ldflags", "-X github.com/hyapp/roomcell/internal/buildinfo.Version=v9.8.7-test", "-o", out, "../../cmd/"+bin)
		build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", bin, err, b)
		}
		got, err := exec.Command(out, "--version").CombinedOutput()
		if want := bin + " v9.8.7-test "; err != nil || !strings.HasPrefix(string(got), want) {
			t.Errorf("%s --version: %q (%v), want prefix %q", bin, got, err, want)
		}
	}
}
