package purge

import (
	"errors"

	"github.com/hyapp/roomcell/persistence"
)

func isNotFound(err error) bool { return errors.Is(err, persistence.ErrNotFound) }
