package purge

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/persistence"
)

// Metrics are the purge worker's instruments, labelled by table. A nil
// *Metrics records nothing.
type Metrics struct {
	// RowsPurged counts rows this node deleted.
	RowsPurged *prometheus.CounterVec
	// OldestAge is the age of the oldest row still stored, and RowEstimate
	// the table's size estimate, both as of this node's last round: they
	// describe the whole table.
	OldestAge   *prometheus.GaugeVec
	RowEstimate *prometheus.GaugeVec
	// Rounds counts finished rounds; Errors counts failed table rounds.
	Rounds prometheus.Counter
	Errors *prometheus.CounterVec
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		RowsPurged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_rows_purged_total",
			Help: "Rows the purge worker of this node deleted, per table.",
		}, []string{"table"}),
		OldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retention_oldest_row_age_ms",
			Help: "Age in milliseconds of the oldest row still stored (0 when empty), per table, as of the last purge round.",
		}, []string{"table"}),
		RowEstimate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retention_table_rows_estimate",
			Help: "The store's estimate of the table's rows (exact in go-memdb), as of the last purge round.",
		}, []string{"table"}),
		Rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retention_purge_rounds_total",
			Help: "Purge rounds this node finished.",
		}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_purge_errors_total",
			Help: "Table rounds of the purge worker that stopped on an error, per table.",
		}, []string{"table"}),
	}
	for _, c := range []prometheus.Collector{m.RowsPurged, m.OldestAge, m.RowEstimate, m.Rounds, m.Errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("purge: register metrics: %w", err)
		}
	}
	for _, table := range persistence.PurgeTables {
		m.RowsPurged.WithLabelValues(table) // at zero from the start
		m.Errors.WithLabelValues(table)
	}
	return m, nil
}
