package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// command is one subcommand, e.g. name "outbox list".
type command struct {
	name  string
	usage string // one line: arguments and what it does
	// flags adds the subcommand's own flags to fs; may be nil.
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, e *env, fs *flag.FlagSet) error
}

// env is what every subcommand gets.
type env struct {
	conn *grpc.ClientConn
	json bool
	out  io.Writer
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("roomctl: duplicate command " + c.name)
	}
	commands[c.name] = c
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

// printJSON writes any value as JSON (for results that are not protos).
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: roomctl [--addr host:port] [--token T] [--json] [--timeout d] <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s\n", n, commands[n].usage)
	}
	fmt.Fprintln(w, "\nrun 'roomctl <command> --help' for its flags")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, so tests can drive it.
func run(args []string, stdout, stderr io.Writer) int {
	global := flag.NewFlagSet("roomctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	global.SetInterspersed(false)
	addr := global.String("addr", envOr("ROOMCELL_ADDR", "127.0.0.1:13001"), "roomcell gRPC address (env ROOMCELL_ADDR)")
	token := global.String("token", os.Getenv("ROOMCELL_TOKEN"), "bearer token (env ROOMCELL_TOKEN)")
	asJSON := global.Bool("json", false, "print JSON instead of text")
	timeout := global.Duration("timeout", 10*time.Second, "deadline of the whole command")
	global.Usage = func() { usage(stderr) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := global.Args()
	// Longest match: "outbox list" before "outbox".
	var cmd *command
	var n int
	for i := min(len(rest), 3); i > 0; i-- {
		if c, ok := commands[strings.Join(rest[:i], " ")]; ok {
			cmd, n = c, i
			break
		}
	}
	if cmd == nil {
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "roomctl: unknown command %q\n", strings.Join(rest, " "))
		}
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("roomctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: roomctl %s [flags]\n  %s\n", cmd.name, cmd.usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest[n:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "roomctl: %v\n", err)
		return 1
	}
	defer conn.Close()
	e := &env{conn: conn, json: *asJSON, out: stdout}
	if err := cmd.run(ctx, e, fs); err != nil {
		fmt.Fprintf(stderr, "roomctl %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
