package mysql

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// MySQL going away (connections refused, or a server that accepts and
// then hangs) must cost a command no more than its deadline, and the same
// store must work again once MySQL is back, without reopening.
func TestMySQLDownAnswersUnavailableInTimeAndRecovers(t *testing.T) {
	const (
		deadline = 300 * time.Millisecond
		slack    = 200 * time.Millisecond
	)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("groupcommit=%v", on), func(t *testing.T) {
			cfg, _ := mysqltest.NewDatabase(t)
			p := startProxy(t, cfg.DSN)
			cfg.DSN = p.DSN()
			groupCommit(on)(&cfg)
			s, err := Open(t.Context(), cfg, WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			key := roomKey(1)
			seq := int64(1)
			if err := s.Append(t.Context(), testAppend(key, seq, "cmd-1", true)); err != nil {
				t.Fatal(err)
			}

			for _, down := range []struct {
				name string
				cut  func()
			}{{"refused", p.Cut}, {"hung", p.Stall}} {
				down.cut()
				calls := map[string]func(ctx context.Context) error{
					"Append": func(ctx context.Context) error {
						return s.Append(ctx, testAppend(key, seq+1, fmt.Sprintf("cmd-%d", seq+1), false))
					},
					"LoadSnapshot": func(ctx context.Context) error { _, err := s.LoadSnapshot(ctx, key); return err },
					"LoadCommands": func(ctx context.Context) error { _, err := s.LoadCommands(ctx, key, 0); return err },
					"FindCommand":  func(ctx context.Context) error { _, err := s.FindCommand(ctx, key, "cmd-1"); return err },
					"ClaimPendingOutbox": func(ctx context.Context) error {
						_, err := s.ClaimPendingOutbox(ctx, "relay", 5000, 1000, 10)
						return err
					},
					"MarkOutboxPublished": func(ctx context.Context) error {
						return s.MarkOutboxPublished(ctx, testAppend(key, 1, "", false).Command.Events[0].EventID, 5000)
					},
					"MarkOutboxPublishedBatch": func(ctx context.Context) error {
						return s.MarkOutboxPublishedBatch(ctx, []string{testAppend(key, 1, "", false).Command.Events[1].EventID}, 5000)
					},
				}
				for name, call := range calls {
					ctx, cancel := context.WithTimeout(t.Context(), deadline)
					start := time.Now()
					err := call(ctx)
					took := time.Since(start)
					cancel()
					if !errors.Is(err, persistence.ErrUnavailable) {
						t.Errorf("%s: %s with MySQL down: got %v, want ErrUnavailable", down.name, name, err)
					}
					if took > deadline+slack {
						t.Errorf("%s: %s with MySQL down answered after %v, deadline %v", down.name, name, took, deadline)
					}
					t.Logf("%s: %s answered in %v: %v", down.name, name, took.Round(time.Millisecond), err)
				}

				p.Restore()
				seq++
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				if err := s.Append(ctx, testAppend(key, seq, fmt.Sprintf("cmd-%d", seq), false)); err != nil {
					t.Fatalf("%s: first Append after MySQL came back: %v", down.name, err)
				}
				log, err := s.LoadCommands(ctx, key, 0)
				cancel()
				if err != nil {
					t.Fatalf("%s: LoadCommands after MySQL came back: %v", down.name, err)
				}
				if len(log) != int(seq) || log[len(log)-1].Seq != seq {
					t.Fatalf("%s: log after recovery has seqs up to %d (%d rows), want 1..%d", down.name, log[len(log)-1].Seq, len(log), seq)
				}
			}
		})
	}
}
