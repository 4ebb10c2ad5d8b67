package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/internal/buildinfo"
)

// command is one subcommand, e.g. name "outbox list". A file adds its
// subcommands with register in an init func; the command tree (groups
// such as "outbox", help, completion) is built from these.
type command struct {
	name  string
	usage string // one line: arguments and what it does
	// flags adds the subcommand's own flags to fs; may be nil. A flag the
	// command cannot do without is marked with require.
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, e *env, fs *flag.FlagSet) error
}

// env is what every subcommand gets.
type env struct {
	conn *grpc.ClientConn
	json bool
	out  io.Writer
	// errOut is stderr, for progress lines that are not the result.
	errOut io.Writer
}

var commands []*command

// groupUsage describes a group of subcommands (the first words of their
// names) in the help; a group without an entry reads "the X commands".
var groupUsage = map[string]string{
	"admin":   "set or remove a room admin",
	"cluster": "cluster members as the node sees them",
	"im":      "repair what the rooms mirror into Tencent IM: ban lists",
	"mic":     "take or release a mic seat",
	"notice":  "private notices: dead letters, one notice's state, requeue",
	"outbox":  "room_outbox rows that did not reach IM: list, show, requeue, skip",
	"room":    "where a room lives in the cluster",
	"rooms":   "the room directory: hottest rooms of an app",
	"seat":    "mute, unmute, lock or unlock a mic seat",
	"user":    "where a user is",
	"wallet":  "operator wallet commands: credit, balance, VIP",
}

func register(c *command) {
	for _, o := range commands {
		if o.name == c.name {
			panic("roomctl: duplicate command " + c.name)
		}
	}
	commands = append(commands, c)
}

// printResult writes m as protojson with --json, else calls human.
func (e *env) printResult(m proto.Message, human func(w io.Writer)) error {
	if e.json {
		b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(e.out, string(b))
		return err
	}
	human(e.out)
	return nil
}

// show is how a command ends after its RPC: a failed RPC is returned as
// an rpcErr, a reply is printed as printResult does.
func (e *env) show(m proto.Message, err error, human func(w io.Writer)) error {
	if err != nil {
		return rpcError(err)
	}
	return e.printResult(m, human)
}

// printJSON writes any value as JSON (for results that are not protos).
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every subcommand takes.
type globals struct {
	addr, token, opToken string
	tls                  configs.ClientTLSConfig
	json                 bool
	timeout              time.Duration
}

// usageError is a mistake in the command line (unknown flag, bad value,
// missing flag or argument): it is printed with the command's usage and
// exits 2, where a failed RPC exits 1.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef makes a usage error; subcommands return it for a wrong argument.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// run is main without the exit, so tests can drive it.
func run(args []string, stdout, stderr io.Writer) int {
	var g globals
	root := newRoot(&g, stdout, stderr)
	root.SetArgs(args)
	cmd, err := unknownCommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteC()
	}
	if err == nil {
		return 0
	}
	// --json reaches the flag only when parsing got that far.
	asJSON := g.json || jsonRequested(args)
	var re *rpcErr
	if errors.As(err, &re) && re.code == codes.Unavailable {
		err = fmt.Errorf("%w (is a roomcell node serving gRPC at --addr %s?)", err, g.addr)
	}
	if re != nil && re.reason == errclass.CodeNotMember.String() && re.meta["removed_reason"] == "" {
		// The server does not know why (the removal is not remembered on
		// the room's node); these are the ways out of a room.
		err = fmt.Errorf("%w (a user leaves a room by leave, by a kick, by joining another room, or when no heartbeat came for the node's presence.stale_after, 60s unless its config or ROOMCELL_PRESENCE_STALE_AFTER says otherwise; roomctl user where shows the user's room)", err)
	}
	var ue usageError
	isUsage := errors.As(err, &ue)
	if asJSON {
		writeJSONError(stderr, cmd, err, isUsage)
	} else {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		if isUsage {
			shortUsage(stderr, cmd)
		}
	}
	if isUsage {
		return 2
	}
	return 1
}

// unknownCommand reports a first word that names no subcommand of the
// group it follows, before cobra parses the flags after it: cobra would
// blame the flags ("roomctl jion --app demo": unknown flag --app), the
// flags being the misspelt command's.
func unknownCommand(root *cobra.Command, args []string) (*cobra.Command, error) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	cmd, rest, err := root.Find(args)
	if err != nil || !cmd.HasAvailableSubCommands() {
		return cmd, nil
	}
	cmd.InheritedFlags() // merges the parents' persistent flags into Flags
	fs := cmd.Flags()
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			return cmd, nil
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f := fs.Lookup(name); !hasValue && (f == nil || f.NoOptDefVal == "") {
				i++ // the flag's value
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if f := fs.ShorthandLookup(a[1:2]); len(a) == 2 && (f == nil || f.NoOptDefVal == "") {
				i++
			}
		default:
			return cmd, noSubcommand(cmd, []string{a})
		}
	}
	return cmd, nil
}

// shortUsage is the command's usage line and own flags; the global flags
// are one --help away rather than burying the error.
func shortUsage(w io.Writer, cmd *cobra.Command) {
	fmt.Fprintf(w, "\nusage: %s\n", cmd.UseLine())
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\ncommands:")
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-16s %s\n", c.Name(), c.Short)
			}
		}
	}
	if fl := cmd.LocalNonPersistentFlags(); fl.HasAvailableFlags() {
		fmt.Fprintf(w, "\nflags:\n%s", fl.FlagUsages())
	}
	fmt.Fprintf(w, "\n'%s --help' shows the global flags too\n", cmd.CommandPath())
}

func jsonRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// writeJSONError puts the error on stderr as one JSON object, so a script
// reading --json output never has to parse prose.
func writeJSONError(w io.Writer, cmd *cobra.Command, err error, isUsage bool) {
	out := struct {
		Command string `json:"command"`
		Error   string `json:"error"`
		Code    string `json:"code,omitempty"`
		Reason  string `json:"reason,omitempty"`
		Usage   bool   `json:"usage_error,omitempty"`
	}{Command: cmd.CommandPath(), Error: err.Error(), Usage: isUsage}
	var re *rpcErr
	if errors.As(err, &re) {
		// The message without the code, which has its own field.
		out.Code, out.Error = re.code.String(), strings.Replace(out.Error, re.Error(), re.msg, 1)
		out.Reason = re.reason
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(w, string(b))
}

// newRoot builds the command tree from the registered commands. It is
// built per run: cobra commands keep their parsed flags.
func newRoot(g *globals, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "roomctl",
		Short: "roomcell's client, operations and benchmark tool",
		Long: "roomctl talks to a roomcell node over gRPC: one subcommand per RPC, operator commands\n" +
			"(outbox, notice, wallet, cluster, purge, im) and a load generator (bench).\n" +
			"Human output by default; --json prints JSON, errors included.",
		Version:       buildinfo.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noSubcommand,
		RunE:          groupHelp,
	}
	// cobra suggests only prefixes unless a distance is set: "jion" gets
	// join, "tkae" take.
	root.SuggestionsMinimumDistance = 2
	root.SetVersionTemplate("roomctl {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.addr, "addr", envOr("ROOMCELL_ADDR", "127.0.0.1:13001"), "roomcell gRPC address (env ROOMCELL_ADDR)")
	pf.StringVar(&g.token, "token", os.Getenv("ROOMCELL_TOKEN"), "client bearer token, sent on client RPCs (env ROOMCELL_TOKEN)")
	pf.StringVar(&g.opToken, "operator-token", os.Getenv("ROOMCELL_OPERATOR_TOKEN"), "operator bearer token, sent on operator RPCs (env ROOMCELL_OPERATOR_TOKEN)")
	pf.BoolVar(&g.tls.Enabled, "tls", os.Getenv("ROOMCELL_TLS") == "1", "connect with TLS (env ROOMCELL_TLS=1); implied by --ca/--cert")
	pf.StringVar(&g.tls.CAFile, "ca", os.Getenv("ROOMCELL_CA"), "PEM CA file that signs the server (env ROOMCELL_CA); default the system roots")
	pf.StringVar(&g.tls.CertFile, "cert", os.Getenv("ROOMCELL_CERT"), "client certificate PEM for mTLS (env ROOMCELL_CERT)")
	pf.StringVar(&g.tls.KeyFile, "key", os.Getenv("ROOMCELL_KEY"), "client key PEM for mTLS (env ROOMCELL_KEY)")
	pf.StringVar(&g.tls.ServerName, "server-name", "", "name to verify in the server certificate; default the host of --addr")
	pf.BoolVar(&g.json, "json", false, "print JSON instead of text (errors too, on stderr)")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "deadline of the whole command (with a unit: 30s, 2m)")

	for _, c := range commands {
		parent := root
		words := strings.Fields(c.name)
		for _, w := range words[:len(words)-1] {
			parent = group(parent, w)
		}
		leaf := existing(parent, words[len(words)-1])
		if leaf == nil {
			leaf = &cobra.Command{Use: words[len(words)-1]}
			parent.AddCommand(leaf)
		}
		leaf.Short = c.usage
		leaf.Use = words[len(words)-1] + " [flags]"
		if strings.HasPrefix(c.usage, "<") {
			// "<event_id>: ..." names its argument first.
			arg, _, _ := strings.Cut(c.usage, ":")
			leaf.Use = words[len(words)-1] + " " + arg + " [flags]"
		}
		leaf.Args = cobra.ArbitraryArgs
		if c.flags != nil {
			c.flags(leaf.Flags())
		}
		leaf.RunE = leafRun(c, g, stdout, stderr)
		// Before cobra's own check of MarkFlagRequired's flags, to name
		// them with their dashes, all at once.
		leaf.PreRunE = func(cmd *cobra.Command, _ []string) error { return checkRequired(cmd.Flags()) }
	}
	strictCompletion(root)
	return root
}

// strictCompletion makes "completion SHELL" refuse a shell cobra does not
// generate (tcsh): cobra's own prints its help and exits 0.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = noSubcommand
			c.RunE = groupHelp
			c.SuggestionsMinimumDistance = 2
		}
	}
}

// group returns parent's subcommand word, adding a group command that
// lists its own subcommands when it has none yet.
func group(parent *cobra.Command, word string) *cobra.Command {
	if c := existing(parent, word); c != nil {
		return c
	}
	short := groupUsage[strings.TrimSpace(parent.CommandPath() + " " + word)[len("roomctl "):]]
	if short == "" {
		short = "the " + word + " commands"
	}
	c := &cobra.Command{Use: word, Short: short, Args: noSubcommand, RunE: groupHelp, SuggestionsMinimumDistance: 2}
	parent.AddCommand(c)
	return c
}

func existing(parent *cobra.Command, word string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == word {
			return c
		}
	}
	return nil
}

// noSubcommand refuses a word that is not a subcommand of a group, with
// cobra's suggestions ("did you mean").
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{errors.New(msg)}
}

// groupHelp: a group without a subcommand prints its own subcommands.
func groupHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

func leafRun(c *command, g *globals, stdout, stderr io.Writer) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		fs := cmd.Flags()
		ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
		defer cancel()
		opts, err := dialOptions(g.tls, g.token, g.opToken)
		if err != nil {
			return usageError{err}
		}
		conn, err := grpc.NewClient(g.addr, opts...)
		if err != nil {
			return usageError{fmt.Errorf("--addr %s: %w", g.addr, err)}
		}
		defer conn.Close()
		return c.run(ctx, &env{conn: conn, json: g.json, out: stdout, errOut: stderr}, fs)
	}
}

// require marks flags a command cannot run without (cobra's
// MarkFlagRequired, which shell completion reads too): roomctl says so
// itself ("--user is required") before any RPC.
func require(fs *flag.FlagSet, names ...string) {
	for _, n := range names {
		if err := cobra.MarkFlagRequired(fs, n); err != nil {
			panic("roomctl: require " + n + ": " + err.Error()) // a typo in a command's flag list
		}
		if f := fs.Lookup(n); f != nil && !strings.HasSuffix(f.Usage, "(required)") {
			f.Usage += " (required)"
		}
	}
}

// checkRequired names every required flag missing.
func checkRequired(fs *flag.FlagSet) error {
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		if req := f.Annotations[cobra.BashCompOneRequiredFlag]; len(req) > 0 && req[0] == "true" && !f.Changed {
			missing = append(missing, "--"+f.Name)
		}
	})
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usagef("%s is required", missing[0])
	default:
		return usagef("%s are required", strings.Join(missing, ", "))
	}
}

// dialOptions picks the transport and, per RPC, the token its class
// needs (grpcapi's one table), so every subcommand sends the right one
// without knowing about classes.
func dialOptions(t configs.ClientTLSConfig, clientToken, operatorToken string) ([]grpc.DialOption, error) {
	t.Enabled = t.Enabled || t.CAFile != "" || t.CertFile != ""
	creds := insecure.NewCredentials()
	tc, err := t.Load()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	token := func(method string, req any) string {
		if grpcapi.RequestClass(method, req) == grpcapi.ClassOperator {
			return cmp.Or(operatorToken, clientToken)
		}
		return cmp.Or(clientToken, operatorToken)
	}
	auth := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if tok := token(method, req); tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if tok := token(method, nil); tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithUnaryInterceptor(auth), grpc.WithStreamInterceptor(stream)}, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
