package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/wallet"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// faultyHolds is the remote wallet's backend with one fault: while cut
// is armed, a HoldGift that committed runs cut before it answers, so the
// room's append of that gift meets a dead room database after its
// reservation exists (the window between a gift's reservation and its room write).
type faultyHolds struct {
	*wallet.Service
	cutNext atomic.Int64 // holds left to cut after
	cut     func()
}

func (f *faultyHolds) HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	res, err := f.Service.HoldGift(ctx, r)
	if err == nil && !res.Duplicate && f.cutNext.Add(-1) >= 0 {
		f.cut()
	}
	return res, err
}

// remotePair is a room node on MariaDB (behind a proxy the test cuts) and
// a separate WalletService on its own store, joined over real gRPC with
// an operator token, as with wallet.addr in production.
type remotePair struct {
	wallet *faultyHolds
	store  *memdb.WalletStore
	proxy  *mysqltest.Proxy
	rooms  v1.RoomServiceClient
}

func startRemotePair(t *testing.T) *remotePair {
	t.Helper()
	const operatorTok = "op-remote-gift"
	log := slog.New(slog.DiscardHandler)
	store := memdb.NewWalletStore()
	t.Cleanup(func() { _ = store.Close() })
	svc, err := wallet.NewService(store, configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100}, wallet.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	mcfg, _ := mysqltest.NewDatabase(t)
	proxy := mysqltest.StartProxy(t, mcfg.DSN)
	fw := &faultyHolds{Service: svc, cut: proxy.Cut}
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log, ClientTokens: []string{"client-remote-gift"}, OperatorTokens: []string{operatorTok}})
	v1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(fw, log))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	_, rc := startDev(t, func(c *configs.Config) {
		c.Store.Kind = "mysql"
		c.TencentIM.AllowFake = true
		c.MySQL = mcfg
		c.MySQL.DSN = proxy.DSN()
		c.MySQL.QueryTimeout = time.Second
		c.Room.StoreTimeout = time.Second
		c.Wallet.Addr, c.Wallet.AuthToken = lis.Addr().String(), operatorTok
		c.Wallet.GiftReconciler.SettleAfter = 500 * time.Millisecond
		c.Wallet.GiftReconciler.PollInterval = 100 * time.Millisecond
	})
	return &remotePair{wallet: fw, store: store, proxy: proxy, rooms: rc}
}

// account is one of a user's balances in the remote wallet.
func (p *remotePair) account(t *testing.T, user, asset string) persistence.Account {
	t.Helper()
	as, err := p.store.Accounts(t.Context(), "a", user)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.AssetType == asset {
			return a
		}
	}
	return persistence.Account{}
}

// settled waits until the reconciler leaves no reservation open.
func (p *remotePair) settled(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := p.store.GiftHoldStats(t.Context())
		if err == nil && st.Open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reservations still open after 20 s: %+v %v", st, err)
		}
	}
}

// A gift whose room append fails after the remote wallet reserved it is
// refunded (by the reconciler on the room node, over WalletService), the
// refund is in the ledger and in wallet_outbox with the next
// balance_version, and retries of the command_id converge on that one
// outcome: refused, never charged again, never delivered.
func TestRemoteWalletRefundsAGiftWhoseAppendFailed(t *testing.T) {
	p := startRemotePair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := p.wallet.Credit(ctx, wallet.CreditRequest{AppCode: "a", CommandID: "top", UserID: "alice", AssetType: wallet.AssetCoin, Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.rooms.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r1", UserId: "alice", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.rooms.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "a", RoomId: "r1", UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	gift := &v1.SendGiftRequest{CommandId: "g1", AppCode: "a", RoomId: "r1", UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 3}
	p.wallet.cutNext.Store(1)
	_, err := p.rooms.SendGift(ctx, gift)
	if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
		t.Fatalf("SendGift with the room database cut after the hold: %v, want Unavailable", err)
	}
	if a := p.account(t, "alice", "COIN"); a.Available != 70 || a.Frozen != 30 {
		t.Fatalf("alice after the hold: %+v, want 70 available + 30 frozen", a)
	}
	p.proxy.Restore()
	p.settled(t)

	h, err := p.store.GiftHold(ctx, "a", "g1")
	if err != nil || h.State != persistence.HoldRefunded {
		t.Fatalf("gift g1 after the reconciler: %+v %v, want refunded", h, err)
	}
	if a := p.account(t, "alice", "COIN"); a.Available != 100 || a.Frozen != 0 || a.BalanceVersion != 3 {
		t.Fatalf("alice after the refund: %+v, want 100 available, 0 frozen, version 3", a)
	}
	if d := p.account(t, "bob", "DIAMOND"); d.Available != 0 {
		t.Fatalf("bob was paid for a gift that did not happen: %+v", d)
	}
	ledger, err := p.store.Ledger(ctx, persistence.AccountKey{AppCode: "a", UserID: "alice", AssetType: "COIN"})
	if err != nil || len(ledger) != 3 {
		t.Fatalf("alice's ledger: %+v %v, want credit, hold, refund", ledger, err)
	}
	if r := ledger[2]; r.TransactionID != h.SettleTransactionID || r.AvailableDelta != 30 || r.FrozenDelta != -30 || r.BalanceVersion != 3 {
		t.Fatalf("refund ledger entry: %+v (settle tx %s)", r, h.SettleTransactionID)
	}
	rows, err := p.store.ListOutboxAfter(ctx, 0, 100)
	if err != nil || len(rows) != 3 {
		t.Fatalf("wallet_outbox: %d rows %v, want 3 (credit, hold, refund)", len(rows), err)
	}
	var refund wallet.BalanceChanged
	if err := json.Unmarshal(rows[2].Payload, &refund); err != nil {
		t.Fatal(err)
	}
	if refund.UserID != "alice" || refund.TransactionID != h.SettleTransactionID || refund.AvailableDelta != 30 ||
		refund.BalanceVersion != 3 || refund.Metadata["reason"] != wallet.ReasonGiftRefund || refund.Metadata["gift_command_id"] != "g1" {
		t.Fatalf("refund event: %+v", refund)
	}

	// Retries converge on the refund: refused every time, nothing moves.
	for range 3 {
		_, err := p.rooms.SendGift(ctx, gift)
		wantCode(t, err, codes.FailedPrecondition, "retry of a refunded gift")
	}
	other := &v1.SendGiftRequest{CommandId: "g1", AppCode: "a", RoomId: "r1", UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 1}
	_, err = p.rooms.SendGift(ctx, other)
	wantCode(t, err, codes.AlreadyExists, "g1 reused for another gift")
	room, err := p.rooms.GetRoom(ctx, &v1.GetRoomRequest{AppCode: "a", RoomId: "r1"})
	if err != nil || room.GetRoom().GetHeat() != 0 {
		t.Fatalf("room after the refunded gift: %v %v, want heat 0", room, err)
	}
	if a := p.account(t, "alice", "COIN"); a.Available != 100 || a.BalanceVersion != 3 {
		t.Fatalf("alice after the retries: %+v", a)
	}

	// The path without faults confirms over WalletService.
	if _, err := p.rooms.SendGift(ctx, &v1.SendGiftRequest{CommandId: "g2", AppCode: "a", RoomId: "r1", UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 1}); err != nil {
		t.Fatal(err)
	}
	if h, err := p.store.GiftHold(ctx, "a", "g2"); err != nil || h.State != persistence.HoldConfirmed {
		t.Fatalf("gift g2: %+v %v, want confirmed by the grain", h, err)
	}
	if a, d := p.account(t, "alice", "COIN"), p.account(t, "bob", "DIAMOND"); a.Available != 90 || a.Frozen != 0 || d.Available != 10 {
		t.Fatalf("after g2: alice %+v, bob %+v", a, d)
	}
}

// Many clients send gifts through a room node with a remote wallet while
// the room database is cut right after some reservations and restored
// shortly after; clients retry each gift with its command_id. Once the
// reconciler is done: no reservation is open, every gift is either
// delivered and charged (a retry answers its recorded reply) or refused
// and refunded (a retry answers FailedPrecondition), the room's heat is
// exactly the confirmed gifts', and COIN and DIAMOND are conserved.
func TestRemoteWalletGiftsOneOutcomeUnderCuts(t *testing.T) {
	p := startRemotePair(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const senders, perSender, credit = 6, 8, 1000
	if _, err := p.rooms.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r1", UserId: "host", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	for s := range senders {
		user := fmt.Sprint("s", s)
		if _, err := p.wallet.Credit(ctx, wallet.CreditRequest{AppCode: "a", CommandID: "top-" + user, UserID: user, AssetType: wallet.AssetCoin, Amount: credit}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.rooms.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + user, AppCode: "a", RoomId: "r1", UserId: user}); err != nil {
			t.Fatal(err)
		}
	}
	var cuts sync.WaitGroup
	var cutCount atomic.Int64
	p.wallet.cut = func() {
		cutCount.Add(1)
		p.proxy.Cut()
		cuts.Go(func() {
			time.Sleep(300 * time.Millisecond)
			p.proxy.Restore()
		})
	}
	p.wallet.cutNext.Store(4)

	request := func(s, k int) *v1.SendGiftRequest {
		return &v1.SendGiftRequest{CommandId: fmt.Sprintf("g%d-%d", s, k), AppCode: "a", RoomId: "r1", UserId: fmt.Sprint("s", s),
			ToUserId: "host", GiftId: "rose", GiftCount: int64(1 + k%3)}
	}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for k := range perSender {
				for try := 0; try < 50; try++ {
					cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					_, err := p.rooms.SendGift(cctx, request(s, k))
					cancel()
					c := status.Code(err)
					if c == codes.OK || c == codes.FailedPrecondition {
						break
					}
					if c != codes.Unavailable && c != codes.DeadlineExceeded {
						t.Errorf("gift %d-%d: %v", s, k, err)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	cuts.Wait()
	p.settled(t)

	var confirmedPrice, refunded int64
	for s := range senders {
		for k := range perSender {
			req := request(s, k)
			h, err := p.store.GiftHold(ctx, "a", req.CommandId)
			if err != nil {
				t.Fatalf("gift %s has no reservation: %v", req.CommandId, err)
			}
			rep, err := p.rooms.SendGift(ctx, req)
			switch h.State {
			case persistence.HoldConfirmed:
				confirmedPrice += h.PriceTotal
				if err != nil || !rep.GetDuplicate() {
					t.Errorf("confirmed gift %s is not in the room log: %v %v", req.CommandId, rep, err)
				}
			case persistence.HoldRefunded:
				refunded++
				if status.Code(err) != codes.FailedPrecondition {
					t.Errorf("refunded gift %s answered %v on retry, want FailedPrecondition", req.CommandId, err)
				}
			default:
				t.Errorf("gift %s left %s", req.CommandId, h.State)
			}
		}
	}
	var coins int64
	for s := range senders {
		a := p.account(t, fmt.Sprint("s", s), "COIN")
		coins += a.Available + a.Frozen
	}
	if coins+confirmedPrice != senders*credit {
		t.Fatalf("COIN not conserved: senders hold %d, confirmed gifts cost %d, credited %d", coins, confirmedPrice, senders*credit)
	}
	if d := p.account(t, "host", "DIAMOND"); d.Available != confirmedPrice {
		t.Fatalf("host has %d DIAMOND, confirmed gifts gave %d", d.Available, confirmedPrice)
	}
	room, err := p.rooms.GetRoom(ctx, &v1.GetRoomRequest{AppCode: "a", RoomId: "r1"})
	if err != nil || room.GetRoom().GetHeat() != confirmedPrice {
		t.Fatalf("room heat %d, confirmed gifts' heat %d (%v)", room.GetRoom().GetHeat(), confirmedPrice, err)
	}
	if cutCount.Load() != 4 {
		t.Fatalf("%d cuts between a hold and its append, want 4", cutCount.Load())
	}
	t.Logf("%d gifts: %d refunded, %d COIN confirmed", senders*perSender, refunded, confirmedPrice)
}
