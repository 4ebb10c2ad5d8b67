package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
)

// leaves walks the command tree as users see it, so a subcommand a file
// adds later is covered without touching this test.
func leaves(t *testing.T) []*cobra.Command {
	t.Helper()
	var g globals
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			if s.HasSubCommands() {
				walk(s)
			}
			if s.RunE != nil && s.Short != "" && !isGroup(s) {
				out = append(out, s)
			}
		}
	}
	walk(newRoot(&g, nil, nil))
	if len(out) < 30 {
		t.Fatalf("found %d subcommands, want every registered one (%d)", len(out), len(commands))
	}
	return out
}

func isGroup(c *cobra.Command) bool {
	for _, r := range commands {
		if r.name == strings.TrimPrefix(c.CommandPath(), "roomctl ") {
			return false
		}
	}
	return true
}

// deadAddr is a loopback port nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Every subcommand, given an unknown flag, a malformed value or nothing at
// all, exits non-zero and says on stderr which flag (or argument) is wrong.
func TestEveryCommandExplainsBadInput(t *testing.T) {
	addr := deadAddr(t)
	for _, c := range leaves(t) {
		words := strings.Fields(strings.TrimPrefix(c.CommandPath(), "roomctl "))
		ctl := func(args ...string) (int, string, string) {
			return runCtl(t, addr, append(append([]string{}, words...), args...)...)
		}
		name := strings.Join(words, " ")

		code, out, errOut := ctl("--no-such-flag")
		if code != 2 || !strings.Contains(errOut, "unknown flag: --no-such-flag") || !strings.Contains(errOut, "usage: roomctl "+name) {
			t.Errorf("%s --no-such-flag: exit %d, stderr %q; want 2, the flag named and the usage", name, code, errOut)
		}
		if out != "" {
			t.Errorf("%s --no-such-flag: stdout %q, want nothing", name, out)
		}

		// A malformed value: of the command's own typed flags, and of a
		// global one every command has.
		var bad [][]string
		c.LocalNonPersistentFlags().VisitAll(func(f *flag.Flag) {
			switch f.Value.Type() {
			case "int", "int32", "int64", "duration", "float64", "uint", "uint32":
				bad = append(bad, []string{"--" + f.Name, "abc"})
			case "bool":
				bad = append(bad, []string{"--" + f.Name + "=maybe"})
			case "string":
				// A string flag at the end without its value.
				bad = append(bad, []string{"--" + f.Name})
			}
		})
		bad = append(bad, []string{"--timeout", "5"})
		for _, args := range bad {
			code, _, errOut := ctl(args...)
			flagName, _, _ := strings.Cut(args[0], "=")
			if code != 2 || !strings.Contains(errOut, flagName) || !strings.Contains(errOut, "usage: roomctl "+name) {
				t.Errorf("%s %v: exit %d, stderr %q; want 2 naming %s, and the usage", name, args, code, errOut, flagName)
			}
		}

		// No arguments: a required flag or argument is named, or, for a
		// command that needs none, the address it could not reach.
		code, _, errOut = ctl()
		if code == 0 {
			t.Errorf("%s without arguments against a dead address: exit 0", name)
			continue
		}
		var required []string
		c.Flags().VisitAll(func(f *flag.Flag) {
			if _, ok := f.Annotations[cobra.BashCompOneRequiredFlag]; ok {
				required = append(required, "--"+f.Name)
			}
		})
		for _, r := range required {
			if !strings.Contains(errOut, r) {
				t.Errorf("%s without arguments: stderr %q does not name required %s", name, errOut, r)
			}
		}
		if len(required) == 0 && !strings.Contains(errOut, "argument") && !strings.Contains(errOut, "--addr "+addr) && !strings.Contains(errOut, "--") {
			t.Errorf("%s without arguments: stderr %q names no flag or argument", name, errOut)
		}
	}
}

// A group lists its own subcommands only; a misspelt one gets a
// suggestion; help and completion work.
func TestGroupsListOnlyTheirCommands(t *testing.T) {
	addr := deadAddr(t)
	for _, tc := range []struct {
		group      string
		want, deny []string
	}{
		{"mic", []string{"take", "release"}, []string{"wallet", "gift", "outbox"}},
		{"wallet", []string{"credit", "balance", "vip"}, []string{"mic", "gift", "outbox"}},
	} {
		code, out, errOut := runCtl(t, addr, tc.group)
		if code != 0 {
			t.Fatalf("roomctl %s: exit %d %s", tc.group, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, "  "+w+" ") {
				t.Errorf("roomctl %s does not list %s:\n%s", tc.group, w, out)
			}
		}
		for _, d := range tc.deny {
			if strings.Contains(out, "  "+d+" ") {
				t.Errorf("roomctl %s lists %s, which is not its subcommand:\n%s", tc.group, d, out)
			}
		}
	}
	code, _, errOut := runCtl(t, addr, "mic", "tkae")
	if code != 2 || !strings.Contains(errOut, `unknown command "tkae"`) || !strings.Contains(errOut, "take") {
		t.Fatalf("mic tkae: exit %d %q; want 2 suggesting take", code, errOut)
	}
	code, out, _ := runCtl(t, addr, "help", "wallet", "credit")
	if code != 0 || !strings.Contains(out, "--amount") {
		t.Fatalf("help wallet credit: exit %d\n%s", code, out)
	}
	code, out, _ = runCtl(t, addr, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_roomctl") {
		t.Fatalf("completion bash: exit %d, %d bytes", code, len(out))
	}
}

// With --json, errors are JSON too: usage errors and RPC errors, with the
// gRPC code apart from the message.
func TestErrorsHonourJSON(t *testing.T) {
	addr := deadAddr(t)
	code, out, errOut := runCtl(t, addr, "--json", "join", "--app", "a")
	if code != 2 || out != "" || errOut != `{"command":"roomctl join","error":"--room, --user are required","usage_error":true}`+"\n" {
		t.Fatalf("usage error: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCtl(t, addr, "--json", "gift", "--count", "x")
	if code != 2 || !strings.HasPrefix(errOut, `{"command":"roomctl gift","error":"invalid argument \"x\" for \"--count\" flag`) {
		t.Fatalf("bad value: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCtl(t, addr, "--json", "get", "--app", "a", "--room", "r")
	if code != 1 || !strings.HasPrefix(errOut, `{"command":"roomctl get","error":`) || !strings.Contains(errOut, `"code":"Unavailable"`) ||
		!strings.Contains(errOut, "--addr "+addr) {
		t.Fatalf("rpc error: exit %d, stderr %q", code, errOut)
	}
}

// A command refused because the user is no longer a member says the ways
// a user leaves a room, heartbeat timeout included.
func TestNotAMemberSaysWhy(t *testing.T) {
	addr, b := startRoomTestServer(t)
	b.notMember = true
	code, _, errOut := runCtl(t, addr, "gift", "--app", "a", "--room", "r", "--user", "u1", "--to", "u2", "--gift", "rose")
	if code != 1 || !strings.Contains(errOut, "FailedPrecondition: user is not a member of the room") ||
		!strings.Contains(errOut, "presence.stale_after") || !strings.Contains(errOut, "roomctl user where") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// A misspelt command is reported as such, with suggestions by edit
// distance, whatever flags follow it; completion refuses a shell it has
// no script for.
func TestUnknownCommandsAndShells(t *testing.T) {
	addr := deadAddr(t)
	for _, args := range [][]string{
		{"jion"},
		{"jion", "--app", "demo"},
		{"--json=false", "jion", "--app", "demo", "--room=r"},
		{"--timeout", "3s", "jion", "-h"},
	} {
		code, out, errOut := runCtl(t, addr, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "jion" for "roomctl"`) ||
			!strings.Contains(errOut, "did you mean join") || strings.Contains(errOut, "unknown flag") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, unknown command jion, did you mean join", args, code, out, errOut)
		}
	}
	code, _, errOut := runCtl(t, addr, "mic", "tkae", "--room", "r")
	if code != 2 || !strings.Contains(errOut, `unknown command "tkae"`) || !strings.Contains(errOut, "did you mean take") {
		t.Errorf("mic tkae --room r: exit %d %q", code, errOut)
	}
	code, _, errOut = runCtl(t, addr, "walet", "balance")
	if code != 2 || !strings.Contains(errOut, "did you mean wallet") {
		t.Errorf("walet balance: exit %d %q", code, errOut)
	}
	code, out, errOut := runCtl(t, addr, "completion", "tcsh")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "tcsh" for "roomctl completion"`) {
		t.Errorf("completion tcsh: exit %d, stdout %d bytes, stderr %q", code, len(out), errOut)
	}
	code, out, _ = runCtl(t, addr, "completion", "fish")
	if code != 0 || !strings.Contains(out, "roomctl") {
		t.Errorf("completion fish: exit %d", code)
	}
}

// --json errors carry the server's reason code from the status details
// beside the gRPC code.
func TestJSONErrorsCarryTheReason(t *testing.T) {
	addr, b := startRoomTestServer(t)
	b.notMember = true
	code, _, errOut := runCtl(t, addr, "--json", "gift", "--app", "a", "--room", "r", "--user", "u1", "--to", "u2", "--gift", "rose")
	var got struct{ Code, Reason, Error string }
	if err := json.Unmarshal([]byte(errOut), &got); err != nil {
		t.Fatalf("stderr is not one JSON object: %q (%v)", errOut, err)
	}
	if code != 1 || got.Code != "FailedPrecondition" || got.Reason != "NOT_MEMBER" || !strings.Contains(got.Error, "not a member") {
		t.Fatalf("exit %d, %+v", code, got)
	}
}
