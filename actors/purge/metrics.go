package purge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/internal/promset"
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
	s := promset.New(reg, "purge")
	m := &Metrics{
		RowsPurged: s.CounterVec("roomcell_retention_rows_purged_total", "Rows the purge worker of this node deleted, per table.", "table"),
		OldestAge: s.GaugeVec("roomcell_retention_oldest_row_age_seconds",
			"Age in seconds of the oldest row still stored (0 when empty), per table, as of the last purge round.", "table"),
		RowEstimate: s.GaugeVec("roomcell_retention_table_rows_estimate",
			"The store's estimate of the table's rows (exact in go-memdb), as of the last purge round.", "table"),
		Rounds: s.Counter("roomcell_retention_purge_rounds_total", "Purge rounds this node finished."),
		Errors: s.CounterVec("roomcell_retention_purge_errors_total", "Table rounds of the purge worker that stopped on an error, per table.", "table"),
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	for _, table := range persistence.PurgeTables {
		m.RowsPurged.WithLabelValues(table) // at zero from the start
		m.Errors.WithLabelValues(table)
	}
	return m, nil
}
