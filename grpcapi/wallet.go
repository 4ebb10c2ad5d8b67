package grpcapi

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// WalletBackend is what WalletServer serves; *wallet.Service implements it.
type WalletBackend interface {
	Credit(ctx context.Context, r wallet.CreditRequest) (wallet.CreditResult, error)
	DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
	PurchaseVip(ctx context.Context, r wallet.PurchaseVipRequest) (wallet.PurchaseVipResult, error)
	GetBalances(ctx context.Context, appCode, userID string) (wallet.Balances, error)
	HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
	ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error)
	ParkedGiftHolds(ctx context.Context, limit int) ([]persistence.GiftHold, error)
	GiftHoldStats(ctx context.Context) (persistence.HoldStats, error)
	ParkGift(ctx context.Context, appCode, commandID, reason string) (bool, error)
}

// maxHoldsPage bounds one ListOpenGiftHolds reply.
const maxHoldsPage = 1000

// WalletServer implements roomcell.v1.WalletService over a WalletBackend.
// The backend validates every field (it is the same code path the room
// grain uses in process), so the server only translates and maps errors.
type WalletServer struct {
	roomcellv1.UnimplementedWalletServiceServer
	backend WalletBackend
	log     *slog.Logger
}

// NewWalletServer returns a WalletServer over backend.
func NewWalletServer(backend WalletBackend, log *slog.Logger) *WalletServer {
	if log == nil {
		log = slog.Default()
	}
	return &WalletServer{backend: backend, log: log}
}

func (s *WalletServer) Credit(ctx context.Context, r *roomcellv1.WalletCreditRequest) (*roomcellv1.WalletCreditReply, error) {
	res, err := s.backend.Credit(ctx, wallet.CreditRequest{
		AppCode: r.GetAppCode(), CommandID: r.GetCommandId(), UserID: r.GetUserId(),
		AssetType: r.GetAssetType(), Amount: r.GetAmount(), Reason: r.GetReason(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &roomcellv1.WalletCreditReply{
		TransactionId: res.TransactionID, AvailableAfter: res.AvailableAfter,
		BalanceVersion: res.BalanceVersion, Duplicate: res.Duplicate,
	}, nil
}

func (s *WalletServer) DebitGift(ctx context.Context, r *roomcellv1.WalletDebitGiftRequest) (*roomcellv1.WalletDebitGiftReply, error) {
	return s.gift(ctx, s.backend.DebitGift, r)
}

// HoldGift reserves a room gift (the remote half of giftdebit.Remote).
func (s *WalletServer) HoldGift(ctx context.Context, r *roomcellv1.WalletDebitGiftRequest) (*roomcellv1.WalletDebitGiftReply, error) {
	return s.gift(ctx, s.backend.HoldGift, r)
}

func (s *WalletServer) gift(ctx context.Context, call func(context.Context, wallet.DebitGiftRequest) (wallet.DebitGiftResult, error), r *roomcellv1.WalletDebitGiftRequest) (*roomcellv1.WalletDebitGiftReply, error) {
	res, err := call(ctx, wallet.DebitGiftRequest{
		AppCode: r.GetAppCode(), CommandID: r.GetCommandId(), RoomID: r.GetRoomId(),
		FromUserID: r.GetFromUserId(), ToUserID: r.GetToUserId(), GiftID: r.GetGiftId(), Count: r.GetGiftCount(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &roomcellv1.WalletDebitGiftReply{
		TransactionId: res.TransactionID, PriceTotal: res.PriceTotal, HeatValue: res.HeatValue,
		DiamondTotal: res.DiamondTotal, SenderCoinAfter: res.SenderCoinAfter,
		ReceiverDiamondAfter: res.ReceiverDiamondAfter, Duplicate: res.Duplicate,
	}, nil
}

// ConfirmGift spends a reservation the room logged.
func (s *WalletServer) ConfirmGift(ctx context.Context, r *roomcellv1.WalletSettleGiftRequest) (*roomcellv1.WalletSettleGiftReply, error) {
	return s.settle(ctx, s.backend.ConfirmGift, r)
}

// RefundGift returns a reservation the room voided.
func (s *WalletServer) RefundGift(ctx context.Context, r *roomcellv1.WalletSettleGiftRequest) (*roomcellv1.WalletSettleGiftReply, error) {
	return s.settle(ctx, s.backend.RefundGift, r)
}

func (s *WalletServer) settle(ctx context.Context, call func(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error), r *roomcellv1.WalletSettleGiftRequest) (*roomcellv1.WalletSettleGiftReply, error) {
	res, err := call(ctx, r.GetAppCode(), r.GetCommandId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &roomcellv1.WalletSettleGiftReply{TransactionId: res.TransactionID, State: res.State}, nil
}

// ListOpenGiftHolds is the reconciler's scan over gRPC.
func (s *WalletServer) ListOpenGiftHolds(ctx context.Context, r *roomcellv1.WalletListOpenGiftHoldsRequest) (*roomcellv1.WalletListOpenGiftHoldsReply, error) {
	if r.GetLimit() < 1 || r.GetLimit() > maxHoldsPage || r.GetBeforeMs() < 0 {
		return nil, toStatus(ctx, s.log, fmt.Errorf("%w: limit must be 1..%d and before_ms not negative", errclass.Invalid, maxHoldsPage))
	}
	var hs []persistence.GiftHold
	var err error
	if r.GetParked() {
		hs, err = s.backend.ParkedGiftHolds(ctx, int(r.GetLimit()))
	} else {
		hs, err = s.backend.OpenGiftHolds(ctx, r.GetBeforeMs(), int(r.GetLimit()))
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	st, err := s.backend.GiftHoldStats(ctx)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &roomcellv1.WalletListOpenGiftHoldsReply{Open: st.Open, OldestCreatedAtMs: st.OldestCreatedAtMs, Parked: st.Parked}
	for _, h := range hs {
		out.Holds = append(out.Holds, &roomcellv1.WalletGiftHold{
			AppCode: h.AppCode, CommandId: h.CommandID, TransactionId: h.TransactionID, RoomId: h.RoomID,
			FromUserId: h.FromUserID, ToUserId: h.ToUserID, GiftId: h.GiftID, GiftCount: h.Count,
			PriceTotal: h.PriceTotal, DiamondTotal: h.DiamondTotal, HeatValue: h.HeatValue, State: h.State,
			CreatedAtMs: h.CreatedAtMs, UpdatedAtMs: h.UpdatedAtMs, ParkedAtMs: h.ParkedAtMs, ParkReason: h.ParkReason,
		})
	}
	return out, nil
}

// ParkGiftHold parks a reservation for every node's reconciler (the
// remote half of the reconciler on a room node).
func (s *WalletServer) ParkGiftHold(ctx context.Context, r *roomcellv1.WalletParkGiftHoldRequest) (*roomcellv1.WalletParkGiftHoldReply, error) {
	parked, err := s.backend.ParkGift(ctx, r.GetAppCode(), r.GetCommandId(), r.GetReason())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &roomcellv1.WalletParkGiftHoldReply{Parked: parked}, nil
}

func (s *WalletServer) PurchaseVip(ctx context.Context, r *roomcellv1.WalletPurchaseVipRequest) (*roomcellv1.WalletPurchaseVipReply, error) {
	res, err := s.backend.PurchaseVip(ctx, wallet.PurchaseVipRequest{
		AppCode: r.GetAppCode(), CommandID: r.GetCommandId(), UserID: r.GetUserId(),
		Level: r.GetLevel(), Source: r.GetSource(),
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &roomcellv1.WalletPurchaseVipReply{
		TransactionId: res.TransactionID, Action: res.Action, PreviousLevel: res.PreviousLevel,
		Level: res.Level, VipName: res.VipName, StartedAtMs: res.StartedAtMs, ExpiresAtMs: res.ExpiresAtMs,
		PricePaid: res.PricePaid, CoinAfter: res.CoinAfter, Duplicate: res.Duplicate,
	}, nil
}

func (s *WalletServer) GetBalances(ctx context.Context, r *roomcellv1.WalletGetBalancesRequest) (*roomcellv1.WalletGetBalancesReply, error) {
	b, err := s.backend.GetBalances(ctx, r.GetAppCode(), r.GetUserId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &roomcellv1.WalletGetBalancesReply{
		AppCode: b.AppCode, UserId: b.UserID,
		Vip: &roomcellv1.WalletVip{
			Level: b.Vip.Level, ActiveLevel: b.VipActiveLevel,
			StartedAtMs: b.Vip.StartedAtMs, ExpiresAtMs: b.Vip.ExpiresAtMs,
		},
	}
	for _, a := range b.Accounts {
		out.Accounts = append(out.Accounts, &roomcellv1.WalletAccount{
			AssetType: a.AssetType, Available: a.Available, Frozen: a.Frozen,
			BalanceVersion: a.BalanceVersion, UpdatedAtMs: a.UpdatedAtMs,
		})
	}
	return out, nil
}

// WalletClient is the in-process wallet API over a remote WalletService
// (configs.WalletConfig.Addr): it returns the same results and the same
// error classes as *wallet.Service, so the room grain does not care where
// the wallet runs.
type WalletClient struct {
	c roomcellv1.WalletServiceClient
}

// NewWalletClient returns a client on conn.
func NewWalletClient(conn grpc.ClientConnInterface) *WalletClient {
	return &WalletClient{c: roomcellv1.NewWalletServiceClient(conn)}
}

// DebitGift calls WalletService.DebitGift. Transport failures and
// Unavailable/DeadlineExceeded answers are wallet.ErrUnavailable: the
// caller retries with the same command_id.
func (w *WalletClient) DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	return w.gift(ctx, w.c.DebitGift, r)
}

// HoldGift calls WalletService.HoldGift: the same results and classes
// as (*wallet.Service).HoldGift, so a refunded gift is ErrPrecondition
// with the wallet's text.
func (w *WalletClient) HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	return w.gift(ctx, w.c.HoldGift, r)
}

func (w *WalletClient) gift(ctx context.Context, call func(context.Context, *roomcellv1.WalletDebitGiftRequest, ...grpc.CallOption) (*roomcellv1.WalletDebitGiftReply, error), r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	res, err := call(ctx, &roomcellv1.WalletDebitGiftRequest{
		CommandId: r.CommandID, RequestId: RequestIDFrom(ctx), AppCode: r.AppCode, RoomId: r.RoomID,
		FromUserId: r.FromUserID, ToUserId: r.ToUserID, GiftId: r.GiftID, GiftCount: r.Count,
	})
	if err != nil {
		return wallet.DebitGiftResult{}, walletError(err)
	}
	return wallet.DebitGiftResult{
		TransactionID: res.GetTransactionId(), PriceTotal: res.GetPriceTotal(), HeatValue: res.GetHeatValue(),
		DiamondTotal: res.GetDiamondTotal(), SenderCoinAfter: res.GetSenderCoinAfter(),
		ReceiverDiamondAfter: res.GetReceiverDiamondAfter(), Duplicate: res.GetDuplicate(),
	}, nil
}

// ConfirmGift calls WalletService.ConfirmGift.
func (w *WalletClient) ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error) {
	return w.settle(ctx, w.c.ConfirmGift, appCode, commandID)
}

// RefundGift calls WalletService.RefundGift.
func (w *WalletClient) RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error) {
	return w.settle(ctx, w.c.RefundGift, appCode, commandID)
}

func (w *WalletClient) settle(ctx context.Context, call func(context.Context, *roomcellv1.WalletSettleGiftRequest, ...grpc.CallOption) (*roomcellv1.WalletSettleGiftReply, error), appCode, commandID string) (wallet.SettleResult, error) {
	res, err := call(ctx, &roomcellv1.WalletSettleGiftRequest{CommandId: commandID, RequestId: RequestIDFrom(ctx), AppCode: appCode})
	if err != nil {
		return wallet.SettleResult{}, walletError(err)
	}
	return wallet.SettleResult{TransactionID: res.GetTransactionId(), State: res.GetState()}, nil
}

// OpenGiftHolds calls WalletService.ListOpenGiftHolds (the reconciler on
// a room node).
func (w *WalletClient) OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error) {
	res, err := w.listHolds(ctx, beforeMs, limit)
	if err != nil {
		return nil, err
	}
	out := make([]persistence.GiftHold, 0, len(res.GetHolds()))
	for _, h := range res.GetHolds() {
		out = append(out, persistence.GiftHold{
			AppCode: h.GetAppCode(), CommandID: h.GetCommandId(), TransactionID: h.GetTransactionId(), RoomID: h.GetRoomId(),
			FromUserID: h.GetFromUserId(), ToUserID: h.GetToUserId(), GiftID: h.GetGiftId(), Count: h.GetGiftCount(),
			PriceTotal: h.GetPriceTotal(), DiamondTotal: h.GetDiamondTotal(), HeatValue: h.GetHeatValue(), State: h.GetState(),
			CreatedAtMs: h.GetCreatedAtMs(), UpdatedAtMs: h.GetUpdatedAtMs(), ParkedAtMs: h.GetParkedAtMs(), ParkReason: h.GetParkReason(),
		})
	}
	return out, nil
}

// GiftHoldStats asks ListOpenGiftHolds for its counts only (one row, the
// smallest page).
func (w *WalletClient) GiftHoldStats(ctx context.Context) (persistence.HoldStats, error) {
	res, err := w.listHolds(ctx, 0, 1)
	if err != nil {
		return persistence.HoldStats{}, err
	}
	return persistence.HoldStats{Open: res.GetOpen(), OldestCreatedAtMs: res.GetOldestCreatedAtMs(), Parked: res.GetParked()}, nil
}

// ParkGift calls WalletService.ParkGiftHold (the reconciler on a room
// node).
func (w *WalletClient) ParkGift(ctx context.Context, appCode, commandID, reason string) (bool, error) {
	res, err := w.c.ParkGiftHold(ctx, &roomcellv1.WalletParkGiftHoldRequest{RequestId: RequestIDFrom(ctx), AppCode: appCode,
		CommandId: commandID, Reason: persistence.CutParkReason(reason)})
	if err != nil {
		return false, walletError(err)
	}
	return res.GetParked(), nil
}

func (w *WalletClient) listHolds(ctx context.Context, beforeMs int64, limit int) (*roomcellv1.WalletListOpenGiftHoldsReply, error) {
	if limit > maxHoldsPage {
		limit = maxHoldsPage
	}
	res, err := w.c.ListOpenGiftHolds(ctx, &roomcellv1.WalletListOpenGiftHoldsRequest{RequestId: RequestIDFrom(ctx), BeforeMs: beforeMs, Limit: int32(limit)})
	if err != nil {
		return nil, walletError(err)
	}
	return res, nil
}

// walletError turns a status back into a wallet error, keeping the
// wallet's text: by the code the status carries (withCode), so
// errors.Is(err, wallet.ErrInsufficientBalance) holds as in process; a
// status without a code by its class. A refused credential (this node's wallet.auth_token is
// not an operator token) is a deployment fault: Unavailable naming
// wallet.auth_token, so the caller is told to retry, nothing is charged,
// and the node's log says what to fix — never Internal, which means a bug.
func walletError(err error) error {
	st, _ := status.FromError(err)
	msg := st.Message()
	if c := codeOf(st); c == errclass.CodeUnauthenticated || c == errclass.CodeOperatorOnly {
		// The wallet's door refused this node, not the call: a setting.
		return fmt.Errorf("%w: the wallet service refused this node's credential (check wallet.auth_token is one of its grpc.auth.operator_tokens): %s: %s", wallet.ErrUnavailable, st.Code(), msg)
	}
	if e := errclass.FromCode(codeOf(st), msg); e != nil {
		return e
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", errclass.Invalid, msg)
	case codes.FailedPrecondition:
		return fmt.Errorf("%w: %s", errclass.Precondition, msg)
	case codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("%w: the wallet service refused this node's credential (check wallet.auth_token is one of its grpc.auth.operator_tokens): %s: %s", wallet.ErrUnavailable, st.Code(), msg)
	case codes.AlreadyExists:
		return fmt.Errorf("%w: %s", wallet.ErrCommandReused, msg)
	case codes.Canceled:
		return fmt.Errorf("%w: %w", wallet.ErrUnavailable, context.Canceled)
	case codes.Internal, codes.Unknown, codes.Unimplemented:
		return fmt.Errorf("wallet service: %s: %s", st.Code(), msg)
	}
	return fmt.Errorf("%w: wallet service: %s: %s", wallet.ErrUnavailable, st.Code(), msg)
}
