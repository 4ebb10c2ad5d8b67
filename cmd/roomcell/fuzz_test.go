package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// FuzzRoomServiceOverGRPC sends programs of RoomService calls, every
// field drawn from valid ids, ids that break a rule, boundary numbers and
// the fuzzer's own string, to a dev process over a real connection, and
// holds what a caller is promised whatever it sends:
//   - no call answers Internal, Unknown, Unavailable or any code outside
//     the error vocabulary, and the process keeps serving;
//   - a refused or duplicate command writes nothing to its room's log
//     and changes nothing in the room;
//   - a command that ran is one row of the log, at the seq it answered;
//   - a command_id that ran once never runs again in that room: the same
//     request answers the first reply as a duplicate, another request is
//     refused or answered as that duplicate;
//   - money is conserved: every sender's COIN is its credit less the gifts
//     that ran, and every receiver's DIAMOND is what those gifts paid;
//   - every IM event of the log reaches the room's IM group, in room_seq
//     order (first deliveries; a resend may repeat one).
//
// Requests are built from the proto descriptors, so an RPC or a field
// added to RoomService is fuzzed without an edit here. `go test` runs the
// seed programs below; make test fuzzes for 30 s more, `make fuzz` for
// FUZZTIME (default 5m). Each step is logged, shown when one fails.
func FuzzRoomServiceOverGRPC(f *testing.F) {
	// Tencent's quotas lifted: a fuzzing worker sends hundreds of messages
	// a second, and the check that every event reached IM would wait out
	// the client's throttle (legitimate lag, not a loss).
	app, _ := startDevB(f, func(c *configs.Config) {
		c.TencentIM.RatePerSecond, c.TencentIM.GroupRatePerSecond = 1_000_000, 1_000_000
	})
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	wc := walletClient(f, app)
	fz := &roomFuzzer{conn: conn, wallet: wc, store: app.store, im: app.fakeIM, methods: roomMethods(f), prices: map[string]int64{}, percent: app.cfg.Wallet.DiamondPercent}
	for _, g := range app.cfg.Gifts {
		fz.prices[g.ID] = g.Price
	}

	// Seed programs: each step's first byte picks the RPC (in descriptor
	// order: 0 CreateRoom, 1 JoinRoom, ...) and the next bytes its fields,
	// in field order; small bytes pick valid values. Each seed opens with
	// a valid CreateRoom (all zeros), then random steps mostly valid.
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		prog := make([]byte, 10, 400)
		for len(prog) < cap(prog) {
			b := byte(rng.IntN(4))
			if rng.IntN(7) == 0 {
				b = byte(rng.IntN(256))
			}
			prog = append(prog, b)
		}
		f.Add(prog, []string{"x", "gift", "名字", "\x00\x1b", strings.Repeat("z", 70), "", "u2", "c0"}[seed])
	}
	// And one story: a gift that runs, its retry, the same id with another
	// count, a seat, a kick with a ban and the banned user's join.
	var story []byte
	for _, st := range []struct {
		method string
		picks  map[protoreflect.Name]byte
	}{
		{"CreateRoom", nil},
		{"JoinRoom", map[protoreflect.Name]byte{"command_id": 1, "user_id": 1}},
		{"SendGift", map[protoreflect.Name]byte{"command_id": 2, "to_user_id": 1}},
		{"SendGift", map[protoreflect.Name]byte{"command_id": 2, "to_user_id": 1}},
		{"SendGift", map[protoreflect.Name]byte{"command_id": 2, "to_user_id": 1, "gift_count": 2}},
		{"TakeMic", map[protoreflect.Name]byte{"command_id": 3, "user_id": 1, "seat": 1}},
		{"KickUser", map[protoreflect.Name]byte{"command_id": 4, "target_user_id": 1}},
		{"JoinRoom", map[protoreflect.Name]byte{"command_id": 5, "user_id": 1}},
	} {
		story = append(story, fz.step(f, st.method, st.picks)...)
	}
	f.Add(story, "")

	f.Fuzz(func(t *testing.T, prog []byte, s string) {
		fz.run(t, prog, s)
	})
}

// roomFuzzer holds what every execution shares: one process, its catalog
// and a counter that gives each execution apps of its own.
type roomFuzzer struct {
	conn    *grpc.ClientConn
	wallet  v1.WalletServiceClient
	store   persistence.Store
	im      *imfake.Server
	methods []protoreflect.MethodDescriptor
	prices  map[string]int64
	percent int64
	runs    atomic.Int64
}

func roomMethods(t testing.TB) []protoreflect.MethodDescriptor {
	svc := v1.File_roomcellv1_room_proto.Services().ByName("RoomService")
	if svc == nil || svc.Methods().Len() < 18 {
		t.Fatalf("RoomService descriptor: %v", svc)
	}
	// Unary RPCs only: a server stream (WatchRoom) stays open until its
	// caller leaves; its own tests drive it.
	var out []protoreflect.MethodDescriptor
	for i := range svc.Methods().Len() {
		if md := svc.Methods().Get(i); !md.IsStreamingServer() && !md.IsStreamingClient() {
			out = append(out, md)
		}
	}
	return out
}

const (
	fuzzCredit   = 1_000_000 // COIN each user of an execution's apps starts with
	fuzzMaxSteps = 40
)

// vocabulary is every code a RoomService call may answer a caller in a
// healthy dev process (grpcapi/errors.go); anything else is a bug.
var vocabulary = map[codes.Code]bool{
	codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.AlreadyExists: true,
	codes.FailedPrecondition: true, codes.PermissionDenied: true, codes.Aborted: true, codes.ResourceExhausted: true,
}

// fuzzRun is one execution: its apps, what its gifts moved, and the
// commands that ran.
type fuzzRun struct {
	*roomFuzzer
	t     *testing.T
	src   []byte
	s     string
	apps  [2]string             // valid app codes no other execution uses
	users [4]string             // valid user ids
	ran   map[string]ranCommand // app/room/command_id -> the command that ran under it
	coin  map[string]int64      // app/user -> expected COIN (available + frozen)
	dia   map[string]int64      // app/user -> expected DIAMOND
	funds map[string]bool       // app/user credited
	// deadline bounds the execution's waits: the fuzzing engine kills a
	// worker whose call takes 10 s, without a word of why.
	deadline time.Time
}

type ranCommand struct {
	req    proto.Message // without request_id, which names a call only
	seq    int64
	events []string
}

func (fz *roomFuzzer) run(t *testing.T, prog []byte, s string) {
	n := fz.runs.Add(1)
	r := &fuzzRun{roomFuzzer: fz, t: t, src: prog, s: s,
		apps:  [2]string{fmt.Sprintf("fa%d", n), fmt.Sprintf("fb%d", n)},
		users: [4]string{"u1", "u2", "u3", "u4"},
		ran:   map[string]ranCommand{}, coin: map[string]int64{}, dia: map[string]int64{},
		funds: map[string]bool{}, deadline: time.Now().Add(8 * time.Second)}
	for step := 0; step < fuzzMaxSteps && len(r.src) > 0; step++ {
		m := fz.methods[int(r.next())%len(fz.methods)]
		req := dynamicpb.NewMessage(m.Input())
		r.fill(req)
		r.call(step, m, req)
	}
	r.checkMoney()
	r.checkDelivery()
}

// step encodes one call of a seed program: the bytes that pick method m
// and, for each of its fields, the value picks names (0 when absent).
func (fz *roomFuzzer) step(t testing.TB, m string, picks map[protoreflect.Name]byte) []byte {
	for i, md := range fz.methods {
		if string(md.Name()) != m {
			continue
		}
		out := []byte{byte(i)}
		fields := md.Input().Fields()
		for j := 0; j < fields.Len(); j++ {
			fd := fields.Get(j)
			if fd.HasPresence() && fd.ContainingOneof() != nil {
				out = append(out, 0) // absent
				continue
			}
			out = append(out, picks[fd.Name()])
			if fd.IsList() { // that many entries, each pick 0
				out = append(out, make([]byte, picks[fd.Name()])...)
			}
		}
		return out
	}
	t.Fatalf("no RoomService method %s", m)
	return nil
}

// next takes the program's next byte (0 once it has run out).
func (r *fuzzRun) next() byte {
	if len(r.src) == 0 {
		return 0
	}
	b := r.src[0]
	r.src = r.src[1:]
	return b
}

func pick[T any](r *fuzzRun, pool ...T) T { return pool[int(r.next())%len(pool)] }

// fill sets every field of req from the program, by the field's name.
func (r *fuzzRun) fill(req *dynamicpb.Message) {
	fields := req.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.HasPresence() && fd.ContainingOneof() != nil && r.next()%2 == 0 {
			continue // an optional field left absent
		}
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			l := req.Mutable(fd).List()
			for range int(r.next()) % 4 {
				l.Append(protoreflect.ValueOfString(r.str(fd.Name())))
			}
		case fd.Kind() == protoreflect.StringKind:
			req.Set(fd, protoreflect.ValueOfString(r.str(fd.Name())))
		case fd.Kind() == protoreflect.Int32Kind:
			req.Set(fd, protoreflect.ValueOfInt32(int32(r.number())))
		case fd.Kind() == protoreflect.Int64Kind:
			req.Set(fd, protoreflect.ValueOfInt64(r.number()))
		case fd.Kind() == protoreflect.BoolKind:
			req.Set(fd, protoreflect.ValueOfBool(r.next()%2 == 1))
		}
	}
}

// str picks a value for a string field: mostly valid ones of this
// execution, then ones that break a rule, and the fuzzer's own string.
func (r *fuzzRun) str(name protoreflect.Name) string {
	long := strings.Repeat("x", 65)
	switch name {
	case "app_code":
		return pick(r, r.apps[0], r.apps[1], r.apps[0], r.s, "", "a b", long)
	case "room_id":
		return pick(r, "r1", "r2", "r1", r.s, "", "r:1", long)
	case "user_id", "target_user_id", "to_user_id", "admin_user_ids":
		return pick(r, r.users[0], r.users[1], r.users[2], r.users[3], r.s, "", "u/1")
	case "command_id":
		return pick(r, "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", r.s, "", "c 1")
	case "gift_id":
		return pick(r, "rose", "heart", "rocket", "nope", r.s, "")
	case "name", "reason", "announcement":
		return pick(r, "Alice's room", "", "spam", r.s, "a\tb", "  ", "line\nbreak", "\u0085", strings.Repeat("名", 400))
	case "page_token":
		return pick(r, "", "u2", r.s)
	}
	return pick(r, "", r.s)
}

func (r *fuzzRun) number() int64 {
	return pick[int64](r, 1, 0, 2, 3, 7, 8, -1, 19, 20, 21, 100, 1000, 1001,
		1<<31-1, -1<<31, 1<<53, 1<<62, -1<<63, 1<<63-1)
}

// scope names a request's room when it is one of this execution's own
// apps (only those are checked for what changed: other executions share
// the fuzzer's string).
func (r *fuzzRun) scope(req *dynamicpb.Message) (room string, own bool) {
	app, id := str(req, "app_code"), str(req, "room_id")
	if !slices.Contains(r.apps[:], app) || (id != "r1" && id != "r2") {
		return "", false
	}
	return app + "/" + id, true
}

func (r *fuzzRun) ctx() (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), r.deadline)
}

func (r *fuzzRun) call(step int, m protoreflect.MethodDescriptor, req *dynamicpb.Message) {
	t := r.t
	if _, err := proto.Marshal(req); err != nil {
		return // not UTF-8: the client cannot send it (codec_test sends such bodies raw)
	}
	key, own := r.scope(req)
	if own && m.Name() == "SendGift" {
		r.fund(req)
	}
	var before *v1.RoomView
	if own {
		before = r.view(key)
	}
	reply := dynamicpb.NewMessage(m.Output())
	ctx, cancel := r.ctx()
	t0 := time.Now()
	err := r.conn.Invoke(ctx, "/"+string(m.Parent().FullName())+"/"+string(m.Name()), req, reply)
	cancel()
	code := status.Code(err)
	what := fmt.Sprintf("step %d: %s %v", step, m.Name(), req)
	t.Logf("%s -> %v (%s)", what, err, time.Since(t0).Round(time.Millisecond))
	if !vocabulary[code] {
		t.Fatalf("%s answered %v, outside the error vocabulary", what, err)
	}
	cr, isCommand := commandReply(reply)
	if !own || !isCommand {
		return
	}
	after := r.view(key)
	cmdID := str(req, "command_id")
	// What the log gained meanwhile: this command's row, if it ran, and
	// rows of the room's own commands (a switched_room leave caused by an
	// earlier join elsewhere, a rank change after an earlier command),
	// which come whenever their worker gets to them.
	var mine []persistence.CommandRecord
	system := 0
	for _, rec := range r.logAfter(key, before.GetSeq()) {
		if _, ok := room.SystemIDPrefix(rec.CommandID); ok {
			system++
			continue
		}
		mine = append(mine, rec)
	}
	first, ranBefore := r.ran[key+"/"+cmdID]
	// Heartbeats are not logged: their ids are not commands' ids.
	ranBefore = ranBefore && m.Name() != "Heartbeat"
	switch {
	case err != nil || cr.GetDuplicate():
		if len(mine) > 0 {
			t.Fatalf("%s (%v, duplicate %v) wrote to its room's log: %+v", what, err, cr.GetDuplicate(), mine)
		}
		if system == 0 && !proto.Equal(before, after) {
			t.Fatalf("%s (%v, duplicate %v) changed its room:\nbefore %v\nafter  %v", what, err, cr.GetDuplicate(), before, after)
		}
		if err == nil && ranBefore && (cr.GetRoomSeq() != first.seq || !slices.Equal(cr.GetEventIds(), first.events)) {
			t.Fatalf("%s: duplicate seq %d events %v, the first run answered seq %d events %v", what, cr.GetRoomSeq(), cr.GetEventIds(), first.seq, first.events)
		}
	default:
		if ranBefore {
			t.Fatalf("%s ran a second time under its command_id (first at seq %d, now %d)", what, first.seq, cr.GetRoomSeq())
		}
		// A command that changed the room is one row at the seq it
		// answered; a no-op (joining a room one is in) writes no events.
		switch {
		case len(cr.GetEventIds()) > 0 && (len(mine) != 1 || mine[0].CommandID != cmdID || mine[0].Seq != cr.GetRoomSeq()):
			t.Fatalf("%s answered seq %d with events %v; the log gained %+v", what, cr.GetRoomSeq(), cr.GetEventIds(), mine)
		case len(cr.GetEventIds()) == 0 && len(mine) > 1:
			t.Fatalf("%s was a no-op; the log gained %+v", what, mine)
		case after.GetSeq() < cr.GetRoomSeq():
			t.Fatalf("%s answered seq %d; the room is at %d", what, cr.GetRoomSeq(), after.GetSeq())
		}
		if m.Name() != "Heartbeat" && len(cr.GetEventIds()) > 0 {
			r.ran[key+"/"+cmdID] = ranCommand{req: withoutRequestID(req), seq: cr.GetRoomSeq(), events: cr.GetEventIds()}
		}
		if m.Name() == "SendGift" {
			r.spend(req)
		}
	}
	// The same request again, request_id aside (it names a call only).
	// InvalidArgument can then come from request_id alone, the one field
	// the first run's validation did not see; it is checked before the
	// command_id, as every field is.
	if ranBefore && proto.Equal(first.req, withoutRequestID(req)) && code != codes.InvalidArgument && (err != nil || !cr.GetDuplicate()) {
		t.Fatalf("%s: the same request again under its command_id answered %v, duplicate %v; want its first reply", what, err, cr.GetDuplicate())
	}
}

func (r *fuzzRun) logAfter(key string, seq int64) []persistence.CommandRecord {
	app, id, _ := strings.Cut(key, "/")
	ctx, cancel := r.ctx()
	defer cancel()
	recs, err := r.store.LoadCommands(ctx, persistence.RoomKey{AppCode: app, RoomID: id}, seq)
	if err != nil {
		r.t.Fatalf("command log of %s: %v", key, err)
	}
	return recs
}

func withoutRequestID(req *dynamicpb.Message) proto.Message {
	c := proto.Clone(req).(*dynamicpb.Message)
	c.Clear(c.Descriptor().Fields().ByName("request_id"))
	return c
}

// commandReply reads a CommandReply out of a dynamic reply.
func commandReply(reply *dynamicpb.Message) (*v1.CommandReply, bool) {
	if reply.Descriptor().FullName() != (&v1.CommandReply{}).ProtoReflect().Descriptor().FullName() {
		return nil, false
	}
	b, err := proto.Marshal(reply)
	cr := &v1.CommandReply{}
	if err != nil || proto.Unmarshal(b, cr) != nil {
		return nil, false
	}
	return cr, true
}

func str(req *dynamicpb.Message, n protoreflect.Name) string {
	if fd := req.Descriptor().Fields().ByName(n); fd != nil {
		return req.Get(fd).String()
	}
	return ""
}

// view reads a room of this execution whole (nil if it does not exist).
func (r *fuzzRun) view(key string) *v1.RoomView {
	app, id, _ := strings.Cut(key, "/")
	ctx, cancel := r.ctx()
	defer cancel()
	got, err := v1.NewRoomServiceClient(r.conn).GetRoom(ctx, &v1.GetRoomRequest{AppCode: app, RoomId: id, PageSize: 1000})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		r.t.Fatalf("GetRoom %s: %v", key, err)
	}
	return got.GetRoom()
}

// fund credits a gift's sender once per execution, so gifts can run.
func (r *fuzzRun) fund(req *dynamicpb.Message) {
	app, user := str(req, "app_code"), str(req, "user_id")
	k := app + "/" + user
	if r.funds[k] || !slices.Contains(r.users[:], user) {
		return
	}
	r.funds[k] = true
	ctx, cancel := r.ctx()
	defer cancel()
	_, err := r.wallet.Credit(ctx, &v1.WalletCreditRequest{CommandId: "fund-" + app + "-" + user, AppCode: app, UserId: user, AssetType: "COIN", Amount: fuzzCredit})
	if err != nil {
		r.t.Fatalf("credit %s: %v", k, err)
	}
	r.coin[k] += fuzzCredit
}

// spend books a gift that ran: its price out of the sender's COIN, its
// share into the receiver's DIAMOND.
func (r *fuzzRun) spend(req *dynamicpb.Message) {
	app := str(req, "app_code")
	count := req.Get(req.Descriptor().Fields().ByName("gift_count")).Int()
	price := r.prices[str(req, "gift_id")] * count
	r.coin[app+"/"+str(req, "user_id")] -= price
	r.dia[app+"/"+str(req, "to_user_id")] += price * r.percent / 100
}

// checkMoney holds every user of this execution's apps to its books: a
// gift that ran is settled (confirmed soon after its reply), one that did
// not is not charged.
func (r *fuzzRun) checkMoney() {
	for _, app := range r.apps {
		for _, user := range r.users {
			k := app + "/" + user
			for {
				coin, frozen, dia := r.balances(app, user)
				if frozen == 0 {
					if coin != r.coin[k] || dia != r.dia[k] {
						r.t.Fatalf("%s: %d COIN and %d DIAMOND, want %d and %d (credits less the gifts that ran, and what they paid)", k, coin, dia, r.coin[k], r.dia[k])
					}
					break
				}
				if time.Now().After(r.deadline) {
					r.t.Fatalf("%s: %d COIN still frozen at the execution's deadline", k, frozen)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// checkDelivery holds this execution's rooms to their logs: the IM group
// receives every IM event the log holds, first deliveries in log order.
func (r *fuzzRun) checkDelivery() {
	for _, app := range r.apps {
		for _, id := range []string{"r1", "r2"} {
			for {
				// IM first, then the log: an event is logged before it is
				// sent, and the room's own commands (a switched_room leave)
				// may still be adding to both.
				var got []string
				seen := map[string]bool{}
				for _, m := range r.im.GroupMessages(roomim.GroupID(app, id)) {
					for _, e := range m.EventIDs {
						if !seen[e] {
							seen[e] = true
							got = append(got, e)
						}
					}
				}
				if time.Now().After(r.deadline) {
					r.t.Fatalf("%s/%s: IM group got %v by the execution's deadline; the log holds more", app, id, got)
				}
				var want []string
				for _, rec := range r.logAfter(app+"/"+id, 0) {
					for _, e := range rec.Events {
						if room.IsIMEvent(e.EventType) {
							want = append(want, e.EventID)
						}
					}
				}
				if slices.Equal(got, want) {
					break
				}
				if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
					r.t.Fatalf("%s/%s: IM group got %v, want the log's IM events %v in order", app, id, got, want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

func (r *fuzzRun) balances(app, user string) (coin, frozen, dia int64) {
	ctx, cancel := r.ctx()
	defer cancel()
	b, err := r.wallet.GetBalances(ctx, &v1.WalletGetBalancesRequest{AppCode: app, UserId: user})
	if err != nil {
		r.t.Fatalf("balances %s/%s: %v", app, user, err)
	}
	for _, a := range b.GetAccounts() {
		switch a.GetAssetType() {
		case "COIN":
			coin, frozen = a.GetAvailable(), a.GetFrozen()
		case "DIAMOND":
			dia = a.GetAvailable() + a.GetFrozen()
		}
	}
	return coin, frozen, dia
}
