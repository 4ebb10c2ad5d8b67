# roomcell — the two commands a new user needs:
#   go run ./cmd/roomcell --dev     run the service on its embedded default
#   make test                       bring up MariaDB/Redis/NATS/etcd/RocketMQ, run every test

GO       ?= go
PKGS     := ./...
export ROOMCELL_TEST_ETCD ?= 127.0.0.1:23790
# Seed 003's real-database verification of the notice service runs in every
# `make test` (actors/notice/walletnotice TestMySQLRepositoryProcessesRealWalletOutbox).
export NOTICE_REAL_MYSQL_DSN ?= root@tcp(127.0.0.1:3306)/hyapp_notice?parseTime=true&charset=utf8mb4&loc=UTC
export NOTICE_REAL_WALLET_DATABASE ?= hyapp_wallet

.PHONY: test errors services vet unit race multimember multimember-2db rocketmq flood fuzz-short fuzz chaos bench build proto dev fmt retention-soak test-gift-chaos-long tour

test: services vet race multimember rocketmq flood tour fuzz-short

services:
	./deploy/local/services.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)

# Every test under the race detector. Multi-member cluster tests are built
# out of -race (Proto.Actor's own start-up race, see
# actors/roomgrain/multimember_test.go) and run in the next target.
race:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

multimember:
	$(GO) test -count=1 -timeout 14m -run '^TestMultiMember' $(PKGS)

# The multi-process tests (the packages whose TestMultiMember* start
# roomcell processes through cluster/clustertest) with the rooms' shards
# split across two room databases, the second on the :3307 MariaDB of
# deploy/local/services.sh. Not in `make test`: it repeats the slowest
# part of the suite.
multimember-2db:
	ROOMCELL_TEST_ROOM_DBS=2 $(GO) test -count=1 -timeout 20m -run '^TestMultiMember' ./cluster/clustertest ./cmd/roomcell

# The tests on the local RocketMQ broker, built out of -race:
# rocketmq-client-go's push consumer races with itself (its process
# queue), which -race would report in every test that consumes.
# One package at a time (-p 1): they share the one broker, and
# roomnotice's test kills and restarts it, which drops every topic's route
# from the name server under a contract test running beside it.
ROCKETMQ_PKGS := ./delivery/mq/... ./actors/relay ./actors/notice/roomnotice ./cmd/roomcell ./configs
rocketmq:
	$(GO) test -p 1 -count=1 -timeout 15m -run 'RocketMQ' $(ROCKETMQ_PKGS)

# The connection flood at the issue's numbers (cmd/roomcell
# TestIdleConnectionFloodFull): 20,000 idle HTTP/2 connections from one
# address and 5,000 from 250 more, opened by child processes (each has its
# own fd limit), while a legitimate client's CreateRoom p99 must stay under
# 100 ms. Built out of -race: the detector's cost is what its p99 would
# measure. The race stage runs the in-process short form (6,000 + 2,500).
# About 15 s.
flood:
	$(GO) test -tags flood -count=1 -timeout 5m -run '^TestIdleConnectionFloodFull$$' -v ./cmd/roomcell

# Coverage-guided fuzzing of every RoomService RPC over gRPC against a dev
# process (cmd/roomcell FuzzRoomServiceOverGRPC: no Internal, refused
# commands write nothing, one command per command_id, money conserved) and
# of the config loader (configs FuzzParse: no panic, what it accepts is
# valid). `go test` runs their seeds; make test searches 30 s and 10 s
# more, `make fuzz` FUZZTIME each. A failing input lands in the package's
# testdata/fuzz and is a seed from then on.
FUZZTIME ?= 5m
# The short form starts from the seeds in a corpus directory of its own
# (the shared cache's corpus grows with every run, and gathering its
# baseline alone would fill the 30 s).
fuzz-short:
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) test -run '^$$' -fuzz '^FuzzRoomServiceOverGRPC$$' -fuzztime 30s -fuzzminimizetime 10x ./cmd/roomcell -args -test.fuzzcachedir="$$d" && \
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 10s -fuzzminimizetime 10x ./configs -args -test.fuzzcachedir="$$d"

fuzz: services
	$(GO) test -run '^$$' -fuzz '^FuzzRoomServiceOverGRPC$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./cmd/roomcell
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./configs

# The gift chaos test's long form: five rounds of a slowed, then cut room
# database and a SIGKILLed node under SendGift load (one round runs in
# make test). About four minutes.
test-gift-chaos-long: services
	ROOMCELL_GIFT_CHAOS_LONG=1 $(GO) test -count=1 -timeout 15m -run '^TestGiftChaosOneOutcomeUnderSlowCutAndKill$$' -v ./cmd/roomcell

# The long form of the multi-process failure tests (docs/cluster.md, "Show"):
# SIGKILL, SIGSTOP 15 s and 30 s, a 15 s network partition (a network
# namespace per node; needs root), rolling SIGTERM restart, duplicate
# activation, 3 repeats each, under load; then the outbox catch-up run
# (a private MariaDB paused 10 s and a node SIGKILLed, 3 times each).
# `make multimember` runs each once (SIGSTOP 15 s; one pause, one kill).
# Every passing Show run appends its table row to CHAOS_TABLE, printed at
# the end. About 20 minutes on two cores.
CHAOS_TABLE ?= /tmp/roomcell-chaos-table.md
chaos: services
	rm -f $(CHAOS_TABLE)
	ROOMCELL_CHAOS_TABLE=$(CHAOS_TABLE) $(GO) test -count=3 -timeout 60m -v -run '^TestMultiMemberProcess' ./cluster/clustertest/
	ROOMCELL_CHAOS_TABLE=$(CHAOS_TABLE) ROOMCELL_CHAOS_PAUSE=30s $(GO) test -count=3 -timeout 20m -v -run '^TestMultiMemberProcessPauseUnderLoad$$' ./cluster/clustertest/
	ROOMCELL_OUTBOX_FAULT_REPEATS=3 $(GO) test -count=1 -timeout 15m -v -run '^TestMultiMemberOutboxCatchesUpAfterDatabasePauseAndKill$$' ./cluster/clustertest/
	@echo "rows of the Show table ($(CHAOS_TABLE)):"; cat $(CHAOS_TABLE)

unit:
	$(GO) test -count=1 -short $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 1 $(PKGS)

# VERSION is what --version prints (default: git describe, else dev).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/hyapp/roomcell/internal/buildinfo.Version=$(VERSION)

build:
	mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/roomcell ./cmd/roomcell
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/roomctl ./cmd/roomctl

dev:
	$(GO) run ./cmd/roomcell --dev

# The command path's figures in one run (deploy/local/bench-table.sh):
# dev JoinRoom/GetRoom ÷ Health with server CPU per call, MariaDB joins ÷
# BenchmarkAppend with mariadbd CPU per join, the relay ÷ Watermill, the
# hot room's watchers; ROUNDS rounds (default 3), medians. SHORT=1 checks
# it runs in a few minutes. Not part of `make test`.
.PHONY: bench-table
bench-table: services
	./deploy/local/bench-table.sh

# gofmt plus import groups: standard library, third party, then this
# module's own packages (goimports -local).
fmt:
	$(GO) run golang.org/x/tools/cmd/goimports@v0.53.0 -local github.com/hyapp/roomcell -w $$(git ls-files '*.go' | grep -v '\.pb\(\.gw\)\?\.go$$')

# Regenerate errclass's code table (codes_gen.go) and docs/errors.md from
# errclass/errors.json, the one record of every error code.
errors:
	$(GO) generate ./errclass

# Regenerate the committed protobuf code (protoc from Debian's
# protobuf-compiler; plugins pinned below).
proto:
	command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
	$(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@v2.29.0
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I api \
		--go_out=api --go_opt=paths=source_relative \
		--go-grpc_out=api --go-grpc_opt=paths=source_relative \
		api/roomcellv1/*.proto
	# The client API's HTTP/JSON routes (api/roomcellv1/gateway.yaml).
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc -I api \
		--grpc-gateway_out=api --grpc-gateway_opt=paths=source_relative \
		--grpc-gateway_opt=grpc_api_configuration=api/roomcellv1/gateway.yaml \
		--grpc-gateway_opt=standalone=false \
		api/roomcellv1/room.proto api/roomcellv1/wallet.proto

# The retention soak: a --dev node with short retention beside one without,
# under roomctl bench for 10 minutes; prints heap and table sizes
# (docs/benchmarks.md has a run). Not part of `make test`.
retention-soak:
	./deploy/local/retention-soak.sh

# The README's tour, run as written against a fresh --dev node (short form:
# benches briefly, no pause), then the MySQL section against the local
# MariaDB. Long form: TOUR_PAUSE=5m make tour (a five-minute pause after the
# joins); TOUR_FULL=1 runs the bench lines as written.
tour: services
	TOUR_MYSQL=1 ./deploy/local/tour.sh

# The long form of the likes test over gRPC (make test runs a few
# seconds of it): 500 members like one room at 10,000 likes a second for
# 30 s in quiet and liking rounds; the IM group gets at most 40 messages a
# second, the total equals the likes acknowledged, and join+gift p99 at
# the server while liking is within 20% of quiet (the p99 at the timing
# client is logged beside it). The likers run in a process of their own;
# PIN=1 (the default on two or more CPUs, as in bench-table.sh) runs the
# server on CPU 1 and the likers on CPU 0, PIN=0 lets both float. Run it
# on a machine of its own. VIA=both (the default here) interleaves the
# likers' two ways in each round (quiet, a LikeRoom call each, one
# LikeStream a member) and holds the bound on the stream's rounds;
# VIA=stream or VIA=unary runs one of them (and holds the bound on it).
# About two and a half minutes with both.
PIN ?= $(shell [ "$$(nproc)" -ge 2 ] && command -v taskset >/dev/null && echo 1 || echo 0)
VIA ?= both
.PHONY: test-likes-long
test-likes-long:
	ROOMCELL_LIKES_LONG=1 ROOMCELL_LIKES_PIN=$(PIN) ROOMCELL_LIKES_VIA=$(VIA) $(GO) test -count=1 -timeout 8m -v -run '^TestLikesAtLiveRoomRatesOverGRPC$$' ./cmd/roomcell

# The long forms of the room-edge chaos tests in cmd/roomcell (make
# multimember runs their short forms): WatchRoom with the owner frozen
# and cut off 15 s each (200 watchers over 50 rooms), and the seat race
# with 20 s before the owner's SIGKILL, 20 s after it, 10 s after its
# restart, then the owner frozen 15 s, then cut off 15 s (needs root,
# like the partition tests). About four minutes.
.PHONY: test-edge-chaos-long
test-edge-chaos-long: services
	ROOMCELL_WATCH_CHAOS_LONG=1 ROOMCELL_SEAT_CHAOS_LONG=1 $(GO) test -count=1 -timeout 15m -v \
		-run '^TestMultiMember(WatchResumesGaplessUnderKillPauseAndPartition|SeatRaceUnderOwnerKill)$$' ./cmd/roomcell
