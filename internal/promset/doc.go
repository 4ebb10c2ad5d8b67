// Package promset builds a component's set of Prometheus instruments in
// one expression each: every constructor registers what it makes on the
// set's registerer and keeps the first registration error, which Err
// returns wrapped in the component's name. A component's NewMetrics then
// reads as the list of its instruments (name, help, labels) without a
// register loop of its own. Names and labels are the caller's, unchanged.
// It imports nothing of roomcell.
package promset
