package main

import (
	"bytes"
	"strings"
	"testing"
)

func runCell(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// The server's command line explains itself: --version, help, and every
// bad flag or argument printed with the usage and exit 2.
func TestRoomcellCommandLine(t *testing.T) {
	code, out, errOut := runCell("--version")
	if code != 0 || !strings.HasPrefix(out, "roomcell dev ") || errOut != "" {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCell("--help")
	if code != 0 || !strings.Contains(out, "migrate") || !strings.Contains(out, "--dev") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dev", "--sead", "2"}, "unknown flag: --sead"},
		{[]string{"--dev=maybe"}, `"--dev"`},
		{[]string{"--config"}, "flag needs an argument: --config"},
		{[]string{"migrat"}, `unknown subcommand "migrat"`},
		{[]string{"migrate", "--confg", "x.yaml"}, "unknown flag: --confg"},
		{[]string{"--dev", "extra"}, `unknown subcommand "extra"`},
		{[]string{"migrate", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runCell(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "usage: roomcell") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, %q and the usage", tc.args, code, out, errOut, tc.want)
		}
	}
	// A configuration mistake is not a command-line one: named, no usage.
	code, _, errOut = runCell()
	if code != 2 || !strings.Contains(errOut, "give --dev, or --config FILE") || strings.Contains(errOut, "usage:") {
		t.Fatalf("no flags: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCell("--dev", "--log-level", "chatty")
	if code != 2 || !strings.Contains(errOut, "log.level") || strings.Contains(errOut, "usage:") {
		t.Fatalf("bad level: exit %d, stderr %q", code, errOut)
	}
	code, out, _ = runCell("completion", "zsh")
	if code != 0 || !strings.Contains(out, "roomcell") {
		t.Fatalf("completion zsh: exit %d", code)
	}
	code, out, errOut = runCell("completion", "tcsh")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown subcommand "tcsh"`) {
		t.Fatalf("completion tcsh: exit %d, stdout %d bytes, stderr %q", code, len(out), errOut)
	}
}
