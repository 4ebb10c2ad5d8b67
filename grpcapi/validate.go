package grpcapi

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/grpcapi/roomcellv1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The checks here run before a request reaches a grain and use the limits
// of actors/room, so a request that passes them fails in Decide only on a
// rule that depends on the room's state. Every error names its field.

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{room.ErrInvalid}, args...)...)
}

func checkText(field, v string, limit int) error {
	if len(v) > limit {
		return invalidf("%s is longer than %d bytes", field, limit)
	}
	if !utf8.ValidString(v) {
		return invalidf("%s is not valid UTF-8", field)
	}
	return nil
}

// checkOptionalID accepts empty: an empty request_id is filled from the
// interceptor, an empty heartbeat command_id is fine (heartbeats are not
// logged, so there is nothing to deduplicate).
func checkOptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return room.CheckID(field, v)
}

// checkHeader checks the fields every room command carries.
func checkHeader(commandID, requestID, appCode, roomID, userID string, commandIDRequired bool) error {
	if err := room.CheckID("app_code", appCode); err != nil {
		return err
	}
	if err := room.CheckID("room_id", roomID); err != nil {
		return err
	}
	if err := room.CheckID("user_id", userID); err != nil {
		return err
	}
	if commandIDRequired {
		if err := room.CheckID("command_id", commandID); err != nil {
			return err
		}
	} else if err := checkOptionalID("command_id", commandID); err != nil {
		return err
	}
	return checkOptionalID("request_id", requestID)
}

func validateCreateRoom(r *roomcellv1.CreateRoomRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	if r.GetName() == "" {
		return invalidf("name is required")
	}
	if err := checkText("name", r.GetName(), room.MaxNameLen); err != nil {
		return err
	}
	if s := r.GetMicSeats(); s < 0 || s > room.MaxMicSeats {
		return invalidf("mic_seats must be between 0 (default %d) and %d, got %d", room.DefaultMicSeats, room.MaxMicSeats, s)
	}
	if n := len(r.GetAdminUserIds()); n > room.MaxAdmins {
		return invalidf("at most %d admin_user_ids, got %d", room.MaxAdmins, n)
	}
	for i, a := range r.GetAdminUserIds() {
		if err := room.CheckID(fmt.Sprintf("admin_user_ids[%d]", i), a); err != nil {
			return err
		}
	}
	return nil
}

func validateJoinRoom(r *roomcellv1.JoinRoomRequest) error {
	return checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true)
}

func validateLeaveRoom(r *roomcellv1.LeaveRoomRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	return checkText("reason", r.GetReason(), room.MaxReasonLen)
}

func validateTakeMic(r *roomcellv1.TakeMicRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	// The room's own seat count is state; the grain checks it.
	if s := r.GetSeat(); s < 0 || s >= room.MaxMicSeats {
		return invalidf("seat must be between 0 and %d, got %d", room.MaxMicSeats-1, s)
	}
	return nil
}

func validateReleaseMic(r *roomcellv1.ReleaseMicRequest) error {
	return checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true)
}

func validateSendGift(r *roomcellv1.SendGiftRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	if err := room.CheckID("to_user_id", r.GetToUserId()); err != nil {
		return err
	}
	if err := room.CheckID("gift_id", r.GetGiftId()); err != nil {
		return err
	}
	if c := r.GetGiftCount(); c <= 0 || c > room.MaxGiftCount {
		return invalidf("gift_count must be between 1 and %d, got %d", room.MaxGiftCount, c)
	}
	return nil
}

func validateKickUser(r *roomcellv1.KickUserRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	if err := room.CheckID("target_user_id", r.GetTargetUserId()); err != nil {
		return err
	}
	if r.GetTargetUserId() == r.GetUserId() {
		return invalidf("target_user_id must differ from user_id")
	}
	if b := r.GetBanSeconds(); b < 0 || b > room.MaxBanSeconds {
		return invalidf("ban_seconds must be between 0 and %d, got %d", room.MaxBanSeconds, b)
	}
	return checkText("reason", r.GetReason(), room.MaxReasonLen)
}

func validateCloseRoom(r *roomcellv1.CloseRoomRequest) error {
	if err := checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), true); err != nil {
		return err
	}
	return checkText("reason", r.GetReason(), room.MaxReasonLen)
}

func validateHeartbeat(r *roomcellv1.HeartbeatRequest) error {
	return checkHeader(r.GetCommandId(), r.GetRequestId(), r.GetAppCode(), r.GetRoomId(), r.GetUserId(), false)
}

func validateGetRoom(r *roomcellv1.GetRoomRequest) error {
	if err := room.CheckID("app_code", r.GetAppCode()); err != nil {
		return err
	}
	if err := room.CheckID("room_id", r.GetRoomId()); err != nil {
		return err
	}
	return checkOptionalID("request_id", r.GetRequestId())
}

// The protobuf runtime refuses a string field holding invalid UTF-8 while
// decoding, and gRPC turns every decode failure into Internal before an
// interceptor or handler runs. For requests whose handler validates every
// string, the server codec instead decodes such fields as they are, so the
// handler answers InvalidArgument naming the field.

// validatedMessages holds the request types whose handlers check UTF-8;
// filled by registerValidated from init functions only.
var validatedMessages = map[protoreflect.FullName]bool{}

func registerValidated(msgs ...proto.Message) {
	for _, m := range msgs {
		validatedMessages[m.ProtoReflect().Descriptor().FullName()] = true
	}
}

// serverCodec is the proto codec with the one fallback described above.
type serverCodec struct{ base encoding.CodecV2 }

func (c serverCodec) Name() string                           { return c.base.Name() }
func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err == nil || !isInvalidUTF8(err) {
		return err
	}
	m, ok := v.(proto.Message)
	if !ok || !validatedMessages[m.ProtoReflect().Descriptor().FullName()] {
		return err
	}
	if unmarshalRawStrings(data.Materialize(), m) != nil {
		return err
	}
	return nil
}

func isInvalidUTF8(err error) bool {
	var u interface{ InvalidUTF8() bool }
	return errors.As(err, &u) && u.InvalidUTF8()
}

// unmarshalRawStrings decodes b into m, taking the top-level string fields
// byte for byte. Invalid UTF-8 deeper down (nested messages) still fails.
func unmarshalRawStrings(b []byte, m proto.Message) error {
	type rawString struct {
		fd protoreflect.FieldDescriptor
		v  string
	}
	fields := m.ProtoReflect().Descriptor().Fields()
	var raws []rawString
	rest := make([]byte, 0, len(b))
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[n:])
		if vn < 0 {
			return protowire.ParseError(vn)
		}
		fd := fields.ByNumber(num)
		if fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsMap() && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			raws = append(raws, rawString{fd, string(v)})
		} else {
			rest = append(rest, b[:n+vn]...)
		}
		b = b[n+vn:]
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return err
	}
	r := m.ProtoReflect()
	for _, s := range raws {
		if s.fd.IsList() {
			r.Mutable(s.fd).List().Append(protoreflect.ValueOfString(s.v))
		} else {
			r.Set(s.fd, protoreflect.ValueOfString(s.v))
		}
	}
	return nil
}
