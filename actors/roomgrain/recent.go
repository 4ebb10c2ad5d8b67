package roomgrain

// recentCommands is a grain's cache of the command ids it ran last, at
// most recentIDs, oldest out first (older ids are found through the
// store's command_id fence). Most activations see a few commands: up to
// smallRecent ids are a slice searched in order, and the map is built
// only past that (an empty map and its first group were ~300 bytes of
// every active room).
type recentCommands struct {
	order []string            // oldest first
	index map[string]struct{} // nil while len(order) <= smallRecent
}

const smallRecent = 8

func (r *recentCommands) has(id string) bool {
	if r.index != nil {
		_, ok := r.index[id]
		return ok
	}
	for _, o := range r.order {
		if o == id {
			return true
		}
	}
	return false
}

func (r *recentCommands) add(id string) {
	if r.has(id) {
		return
	}
	if len(r.order) >= recentIDs {
		if r.index != nil {
			delete(r.index, r.order[0])
		}
		r.order[0] = ""
		r.order = r.order[1:]
	}
	r.order = append(r.order, id)
	switch {
	case r.index != nil:
		r.index[id] = struct{}{}
	case len(r.order) > smallRecent:
		r.index = make(map[string]struct{}, 2*smallRecent)
		for _, o := range r.order {
			r.index[o] = struct{}{}
		}
	}
}
