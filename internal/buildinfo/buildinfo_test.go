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

// The -X flag the Makefile passes reaches both binaries' --version, and
// without it they say dev.
func TestLdflagsSetVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	dir := t.TempDir()
	for _, bin := range []string{"roomcell", "roomctl"} {
		for _, c := range []struct{ ldflags, want string }{
			{"-X github.com/hyapp/roomcell/internal/buildinfo.Version=v9.8.7-test", bin + " v9.8.7-test "},
			{"", bin + " dev "},
		} {
			out := filepath.Join(dir, bin)
			build := exec.Command("go", "build", "-ldflags", c.ldflags, "-o", out, "../../cmd/"+bin)
			build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
			if b, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", bin, err, b)
			}
			got, err := exec.Command(out, "--version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(got), c.want) {
				t.Errorf("%s --version with ldflags %q: %q (%v), want prefix %q", bin, c.ldflags, got, err, c.want)
			}
		}
	}
}
