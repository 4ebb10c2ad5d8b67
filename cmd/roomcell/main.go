package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	flag "github.com/spf13/pflag"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/gcfloor"
	"github.com/hyapp/roomcell/logthrottle"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// flags are the command-line overrides of the configuration.
type flags struct {
	dev      bool
	config   string
	grpcAddr string
	httpAddr string
	logLevel string
	nodeID   string
}

func parseFlags(args []string, stderr io.Writer) (flags, []string, error) {
	var f flags
	fs := flag.NewFlagSet("roomcell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.dev, "dev", false, "single node, go-memdb store, fake Tencent IM: no other server needed")
	fs.StringVar(&f.config, "config", "", "YAML configuration file (see configs/config.yaml)")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "gRPC listen address (overrides grpc.addr)")
	fs.StringVar(&f.httpAddr, "http-addr", "", "ops HTTP listen address for /healthz /readyz /metrics (overrides http.addr)")
	fs.StringVar(&f.logLevel, "log-level", "", "debug|info|warn|error (overrides log.level)")
	fs.StringVar(&f.nodeID, "node-id", "", "node id (overrides node_id)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: roomcell [--dev | --config FILE] [flags]        run the server")
		fmt.Fprintln(stderr, "       roomcell migrate --config FILE                   apply MySQL schemas and exit")
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	return f, fs.Args(), err
}

// loadConfig builds the configuration from the file (or dev defaults) and
// the flags.
func loadConfig(f flags) (configs.Config, error) {
	var cfg configs.Config
	switch {
	case f.config != "":
		c, err := configs.Load(f.config)
		if err != nil {
			return cfg, err
		}
		cfg = c
	case f.dev:
		cfg = configs.Default()
	default:
		return cfg, errors.New("roomcell: give --dev or --config FILE")
	}
	if f.dev {
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
	if f.logLevel != "" {
		cfg.Log.Level = f.logLevel
	}
	if f.nodeID != "" {
		cfg.NodeID = f.nodeID
	}
	return cfg, cfg.Validate()
}

// newLogger writes repeated identical errors once per
// log.repeat_interval: a store outage fails every command, and one line
// per failure would bury everything else.
func newLogger(cfg configs.LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(logthrottle.New(h, cfg.RepeatInterval))
}

func run(args []string, stderr io.Writer) int {
	f, rest, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := loadConfig(f)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := newLogger(cfg.Log, stderr).With("node_id", cfg.NodeID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if len(rest) > 0 {
		switch rest[0] {
		case "migrate":
			if err := migrate(ctx, cfg, log); err != nil {
				log.Error("migrate failed", "error", err)
				return 1
			}
			return 0
		default:
			fmt.Fprintf(stderr, "roomcell: unknown subcommand %q\n", rest[0])
			return 2
		}
	}

	if err := serve(ctx, cfg, log, f.dev); err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	return 0
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
