package roomgrain_test

import (
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomlikes"
)

func init() {
	roomgrain.ObserveLikes = func(window time.Duration) roomgrain.NewObserver {
		return roomlikes.Observe(roomlikes.Config{Window: window})
	}
}
