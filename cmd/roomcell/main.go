package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/buildinfo"
	"github.com/hyapp/roomcell/internal/gcfloor"
	"github.com/hyapp/roomcell/internal/logthrottle"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command-line overrides of the configuration.
type flags struct {
	dev      bool
	config   string
	grpcAddr string
	httpAddr string
	logLevel string
	nodeID   string
	// gatewayAddr overrides gateway.addr (the HTTP/JSON client API).
	gatewayAddr string
	// The MySQL database names (override mysql.*_database), so two
	// checkouts or a test can share one server.
	roomDB, walletDB, noticeDB string
}

// usageError is a mistake on the command line: printed with the usage,
// exit 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitError ends the process with code; err, when set, is printed (a
// failure the subcommand already logged has none).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// newRoot builds the command tree: the root serves, migrate applies the
// schemas. Built per run: cobra keeps parsed flags in its commands.
func newRoot(f *flags, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "roomcell [--dev | --config FILE] [flags]",
		Short: "roomcell serves voice-chat rooms over gRPC",
		Long: "roomcell runs the server: --dev is one node with everything in memory and a fake\n" +
			"Tencent IM; --config FILE runs the roles the file names against MySQL, Redis, etcd.",
		Version:       buildinfo.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfig(cmd, *f, stderr, "start", func(ctx context.Context, cfg configs.Config, log *slog.Logger) error {
				return serve(ctx, cfg, log, f.dev)
			})
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("roomcell {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.BoolVar(&f.dev, "dev", false, "single node, go-memdb store, fake Tencent IM: no other server needed")
	pf.StringVar(&f.config, "config", "", "YAML configuration file (see configs/config.yaml)")
	pf.StringVar(&f.grpcAddr, "grpc-addr", "", "gRPC listen address (overrides grpc.addr)")
	pf.StringVar(&f.httpAddr, "http-addr", "", "ops HTTP listen address for /healthz /readyz /metrics (overrides http.addr)")
	pf.StringVar(&f.gatewayAddr, "gateway-addr", "", "HTTP/JSON client API listen address (overrides gateway.addr; off by default)")
	pf.StringVar(&f.logLevel, "log-level", "", "debug|info|warn|error (overrides log.level)")
	pf.StringVar(&f.nodeID, "node-id", "", "node id (overrides node_id)")
	pf.StringVar(&f.roomDB, "room-database", "", "MySQL database of the rooms (overrides mysql.room_database)")
	pf.StringVar(&f.walletDB, "wallet-database", "", "MySQL database of the wallet (overrides mysql.wallet_database)")
	pf.StringVar(&f.noticeDB, "notice-database", "", "MySQL database of the notices (overrides mysql.notice_database)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return flagsFromEnv(cmd.Flags(), os.LookupEnv) }
	var check bool
	mig := &cobra.Command{
		Use:   "migrate --config FILE [--check]",
		Short: "apply the MySQL schemas of the configuration and exit",
		Long: "migrate applies the MySQL schemas of the configuration and exits. With --check it\n" +
			"changes nothing: it prints each database's state and exits 1 when one is behind\n" +
			"the binary (migrations to apply) or ahead of it (migrations it does not know).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if check {
				return withConfig(cmd, *f, stderr, "migrate --check", func(ctx context.Context, cfg configs.Config, log *slog.Logger) error {
					return checkMigrations(ctx, cfg, stdout)
				})
			}
			return withConfig(cmd, *f, stderr, "migrate", migrate)
		},
	}
	mig.Flags().BoolVar(&check, "check", false, "change nothing; exit 1 when a database's schema is behind or ahead of this binary (deploy pipelines)")
	root.AddCommand(mig)
	// "completion SHELL" for a shell cobra has no script for (tcsh) is a
	// mistake, not a request for help.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = noArgs
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	return root
}

// FlagEnv is the environment variable of a flag: ROOMCELL_ and its name
// in capitals with "_" for "-" (--gateway-addr: ROOMCELL_GATEWAY_ADDR).
func FlagEnv(name string) string {
	return configs.EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagsFromEnv gives each flag not on the command line its variable's
// value: a flag beats its variable, the variable beats the file.
func flagsFromEnv(fs *pflag.FlagSet, env func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err != nil || fl.Changed || fl.Name == "help" || fl.Name == "version" {
			return
		}
		v, ok := env(FlagEnv(fl.Name))
		if !ok {
			return
		}
		if serr := fs.Set(fl.Name, v); serr != nil {
			err = usageError{fmt.Errorf("environment variable %s: %w", FlagEnv(fl.Name), serr)}
		}
	})
	return err
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasAvailableSubCommands() {
		return usageError{fmt.Errorf("unknown subcommand %q (roomcell --help lists them)", args[0])}
	}
	return usageError{fmt.Errorf("unexpected argument %q", args[0])}
}

// setup loads the configuration and builds the logger a subcommand needs.
func setup(f flags, stderr io.Writer) (configs.Config, *slog.Logger, error) {
	cfg, err := loadConfig(f)
	if err != nil {
		// A configuration error, not a command-line one: no usage.
		return cfg, nil, exitError{2, err}
	}
	log := newLogger(cfg.Log, stderr).With("node_id", cfg.NodeID)
	// Packages that log through slog.Default (the MySQL migrations, the
	// driver) then write the same format as the rest.
	slog.SetDefault(log)
	return cfg, log, nil
}

// withConfig runs one subcommand's work with the configuration, its
// logger and a context that ends on SIGTERM or SIGINT; a failure is
// logged as what failed and exits 1.
func withConfig(cmd *cobra.Command, f flags, stderr io.Writer, what string, work func(context.Context, configs.Config, *slog.Logger) error) error {
	cfg, log, err := setup(f, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := work(ctx, cfg, log); err != nil {
		log.Error(what+" failed", "error", err)
		return exitError{code: 1}
	}
	return nil
}

// loadConfig builds the configuration in layers, each over the one
// before: the defaults, --dev's settings, the file, the ROOMCELL_*
// variables of the config keys, the flags (whose own variables cobra's
// pre-run has read).
func loadConfig(f flags) (configs.Config, error) {
	l := configs.Layers{Env: os.LookupEnv}
	switch {
	case f.config == "" && !f.dev:
		return configs.Config{}, errors.New("give --dev, or --config FILE (or ROOMCELL_DEV=true, ROOMCELL_CONFIG=FILE)")
	case f.config != "":
		b, err := os.ReadFile(f.config)
		if err != nil {
			return configs.Config{}, fmt.Errorf("config: %w", err)
		}
		l.File = b
	}
	if f.dev {
		l.Base = []byte(devTour)
	}
	cfg, err := configs.Assemble(l)
	if err != nil {
		return cfg, err
	}
	if f.dev {
		// What --dev means, whatever the file says: no server needed.
		cfg.Store.Kind = configs.StoreMemdb
		cfg.Cluster.Provider = configs.ProviderSingle
		cfg.TencentIM.Enabled = false
	}
	// The flags win over whichever address the roles would use.
	if f.grpcAddr != "" {
		cfg.GRPC.Addr, cfg.Notice.GRPCAddr = f.grpcAddr, f.grpcAddr
	}
	if f.httpAddr != "" {
		cfg.HTTP.Addr, cfg.Notice.HTTPAddr = f.httpAddr, f.httpAddr
	}
	if f.gatewayAddr != "" {
		cfg.Gateway.Addr = f.gatewayAddr
	}
	if f.logLevel != "" {
		cfg.Log.Level = f.logLevel
	}
	if f.nodeID != "" {
		cfg.NodeID = f.nodeID
	}
	cfg.MySQL.RoomDatabase = cmp.Or(f.roomDB, cfg.MySQL.RoomDatabase)
	cfg.MySQL.WalletDatabase = cmp.Or(f.walletDB, cfg.MySQL.WalletDatabase)
	cfg.MySQL.NoticeDatabase = cmp.Or(f.noticeDB, cfg.MySQL.NoticeDatabase)
	return cfg, cfg.Validate()
}

// DevStaleAfter is how long --dev keeps a member that sends no heartbeat:
// a person trying the README at their own pace is not a client that died.
const DevStaleAfter = 24 * time.Hour

// devTour is --dev's layer under the file: every README section on one
// node (all four roles, both notice workers) and members kept for
// DevStaleAfter without heartbeats. A file given with --dev changes what
// it sets and keeps the rest.
const devTour = `
roles: [room, wallet, relay, notice]
notice:
  wallet_notice_worker: {enabled: true}
  room_notice_worker: {enabled: true}
presence:
  stale_after: 24h
`

// newLogger writes every repeated line, at any level, once per
// log.repeat_interval: a store or IM outage fails every command, and one
// line per failure would bury everything else.
func newLogger(cfg configs.LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(logthrottle.New(h, cfg.RepeatInterval))
}

func run(args []string, stdout, stderr io.Writer) int {
	var f flags
	root := newRoot(&f, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ee.err)
		}
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n\nusage: %s\n\nflags:\n%s\n'%s --help' says more\n",
			cmd.CommandPath(), err, cmd.UseLine(), cmd.Flags().FlagUsages(), cmd.CommandPath())
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return 1
	}
}

// serve runs the server until ctx ends. The GC floor is set here and not
// in Start: the GC percent is the process's, and tests run many servers
// in one process.
func serve(ctx context.Context, cfg configs.Config, log *slog.Logger, dev bool) error {
	stopFloor, err := gcfloor.Start(cfg.Runtime.GCHeapFloorBytes())
	if err != nil {
		return err
	}
	defer stopFloor()
	app, err := Start(ctx, cfg, log, dev)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("signal received, shutting down")
	app.Shutdown()
	return nil
}
