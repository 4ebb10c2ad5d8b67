package main

import "github.com/hyapp/roomcell/persistence"

func outboxAll() persistence.OutboxFilter { return persistence.OutboxFilter{} }
