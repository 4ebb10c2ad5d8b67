package grpcapi

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

// WalletBackend is what WalletServer serves; *wallet.Service implements it.
type WalletBackend interface {
	Credit(ctx context.Context, r wallet.CreditRequest) (wallet.CreditResult, error)
	DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
	PurchaseVip(ctx context.Context, r wallet.PurchaseVipRequest) (wallet.PurchaseVipResult, error)
	GetBalances(ctx context.Context, appCode, userID string) (wallet.Balances, error)
}

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
	res, err := s.backend.DebitGift(ctx, wallet.DebitGiftRequest{
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
	res, err := w.c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{
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

// walletError turns a status back into a wallet class. FailedPrecondition
// from DebitGift can only be an insufficient balance.
func walletError(err error) error {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", wallet.ErrInvalid, msg)
	case codes.FailedPrecondition:
		return fmt.Errorf("%w: %s", wallet.ErrInsufficientBalance, msg)
	case codes.AlreadyExists:
		return fmt.Errorf("%w: %s", wallet.ErrConflict, msg)
	case codes.Canceled:
		return fmt.Errorf("%w: %w", wallet.ErrUnavailable, context.Canceled)
	case codes.Internal, codes.Unknown, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return fmt.Errorf("wallet service: %s: %s", st.Code(), msg)
	}
	return fmt.Errorf("%w: wallet service: %s: %s", wallet.ErrUnavailable, st.Code(), msg)
}
