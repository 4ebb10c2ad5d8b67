package directory

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what the rooms' directory work did.
type Metrics struct {
	Errors      *prometheus.CounterVec // by op
	Dropped     prometheus.Counter
	Leaves      *prometheus.CounterVec // switched_room leaves sent, by result
	RankChanges prometheus.Counter
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_room_directory_errors_total",
			Help: "Room directory calls of room grains that failed (the command they followed did not), by operation.",
		}, []string{"op"}),
		Dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_room_directory_dropped_total",
			Help: "Directory work items dropped because a room's directory backlog was full; the room's next refresh redoes them.",
		}),
		Leaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_room_directory_switch_leaves_total",
			Help: "switched_room leaves sent to a user's previous room, by result (left, noop, failed).",
		}, []string{"result"}),
		RankChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_room_directory_rank_changes_total",
			Help: "RoomRankChanged events committed by rooms of this node.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Errors, m.Dropped, m.Leaves, m.RankChanges} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("directory: register metrics: %w", err)
		}
	}
	// At zero from the start, so a dashboard shows no errors as 0.
	for _, op := range []string{"set_user_room", "claim_user_room", "clear_user_room", "sync_room", "update_room", "remove_room", "heartbeat"} {
		m.Errors.WithLabelValues(op)
	}
	for _, r := range []string{"left", "noop", "failed"} {
		m.Leaves.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) failed(op string) {
	if m != nil {
		m.Errors.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) dropped() {
	if m != nil {
		m.Dropped.Inc()
	}
}

func (m *Metrics) leave(result string) {
	if m != nil {
		m.Leaves.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) rankChanged() {
	if m != nil {
		m.RankChanges.Inc()
	}
}
