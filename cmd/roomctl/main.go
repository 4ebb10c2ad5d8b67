package main

import (
	"cmp"
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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
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
	fmt.Fprintln(w, "usage: roomctl [--addr host:port] [--token T] [--operator-token T] [--tls] [--ca F] [--cert F --key F] [--json] [--timeout d] <command> [flags]")
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
	token := global.String("token", os.Getenv("ROOMCELL_TOKEN"), "client bearer token, sent on client RPCs (env ROOMCELL_TOKEN)")
	opToken := global.String("operator-token", os.Getenv("ROOMCELL_OPERATOR_TOKEN"), "operator bearer token, sent on operator RPCs (env ROOMCELL_OPERATOR_TOKEN)")
	var tlsCfg configs.ClientTLSConfig
	global.BoolVar(&tlsCfg.Enabled, "tls", os.Getenv("ROOMCELL_TLS") == "1", "connect with TLS (env ROOMCELL_TLS=1); implied by --ca/--cert")
	global.StringVar(&tlsCfg.CAFile, "ca", os.Getenv("ROOMCELL_CA"), "PEM CA file that signs the server (env ROOMCELL_CA); default the system roots")
	global.StringVar(&tlsCfg.CertFile, "cert", os.Getenv("ROOMCELL_CERT"), "client certificate PEM for mTLS (env ROOMCELL_CERT)")
	global.StringVar(&tlsCfg.KeyFile, "key", os.Getenv("ROOMCELL_KEY"), "client key PEM for mTLS (env ROOMCELL_KEY)")
	global.StringVar(&tlsCfg.ServerName, "server-name", "", "name to verify in the server certificate; default the host of --addr")
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
	opts, err := dialOptions(tlsCfg, *token, *opToken)
	if err != nil {
		fmt.Fprintf(stderr, "roomctl: %v\n", err)
		return 2
	}
	conn, err := grpc.NewClient(*addr, opts...)
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
	return []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithUnaryInterceptor(auth)}, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
