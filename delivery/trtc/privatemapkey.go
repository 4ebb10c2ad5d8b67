package trtc

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/hyapp/roomcell/internal/tlssig"
)

// Privilege bits of a PrivateMapKey, as TRTC's advanced permission
// control numbers them ("Enabling Advanced Permission Control",
// cloud.tencent.com/document/product/647/32240, trtc.io/document/35157):
// bit 1 creates the room, bit 2 enters it, bit 3 sends audio, bit 4
// receives audio, then video, then the sub-stream (screen sharing).
const (
	PrivilegeCreateRoom uint32 = 1 << iota
	PrivilegeEnterRoom
	PrivilegeSendAudio
	PrivilegeReceiveAudio
	PrivilegeSendVideo
	PrivilegeReceiveVideo
	PrivilegeSendSubVideo
	PrivilegeReceiveSubVideo
)

// PrivateMapKey failures, one per check, so the fake can refuse with the
// reason and tests can tell them apart.
var (
	ErrKeyMalformed       = errors.New("privatemapkey malformed")
	ErrKeyAppMismatch     = errors.New("privatemapkey sdkappid mismatch")
	ErrKeyUserMismatch    = errors.New("privatemapkey user mismatch")
	ErrKeyRoomMismatch    = errors.New("privatemapkey room mismatch")
	ErrKeyExpired         = errors.New("privatemapkey expired")
	ErrKeySignature       = errors.New("privatemapkey signature mismatch")
	ErrKeyNoUserBuf       = errors.New("privatemapkey carries no permission record (a plain UserSig?)")
	ErrKeyUserBufVersion  = errors.New("privatemapkey permission record is not the string-room-id form")
	errUserBufFieldTooBig = errors.New("privatemapkey: user id or room id over 65535 bytes")
)

// userBufVersion is the first byte of the record: 0 for a numeric room id,
// 1 when the record ends with a string room id (the only form roomcell
// issues: its audio rooms are string ids).
const userBufVersion = 1

// UserBuf is the permission record a PrivateMapKey signs (Tencent's
// "userbuf"), big-endian:
//
//	u8  version (1: string room id)
//	u16 len(user id), user id
//	u32 sdkappid
//	u32 numeric room id (0 with a string room id)
//	u32 expiry, Unix seconds (issue time + ttl)
//	u32 privilege bits
//	u32 account type (0)
//	u16 len(room id), room id
type UserBuf struct {
	UserID     string
	SDKAppID   uint32
	RoomID     string
	ExpiresAt  int64 // Unix seconds
	Privileges uint32
}

// Marshal encodes the record.
func (u UserBuf) Marshal() ([]byte, error) {
	if len(u.UserID) > 0xFFFF || len(u.RoomID) > 0xFFFF {
		return nil, errUserBufFieldTooBig
	}
	b := make([]byte, 0, 1+2+len(u.UserID)+20+2+len(u.RoomID))
	b = append(b, userBufVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(u.UserID)))
	b = append(b, u.UserID...)
	b = binary.BigEndian.AppendUint32(b, u.SDKAppID)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(u.ExpiresAt))
	b = binary.BigEndian.AppendUint32(b, u.Privileges)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(u.RoomID)))
	b = append(b, u.RoomID...)
	return b, nil
}

// ParseUserBuf decodes a string-room-id record; anything else (the
// numeric form, a short or long buffer) is an error.
func ParseUserBuf(b []byte) (UserBuf, error) {
	var u UserBuf
	if len(b) < 3 {
		return u, ErrKeyMalformed
	}
	if b[0] != userBufVersion {
		return u, ErrKeyUserBufVersion
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	b = b[3:]
	if len(b) < n+20+2 {
		return u, ErrKeyMalformed
	}
	u.UserID, b = string(b[:n]), b[n:]
	u.SDKAppID = binary.BigEndian.Uint32(b[0:4])
	// b[4:8] is the numeric room id, 0 in this form; b[16:20] the
	// account type, 0.
	u.ExpiresAt = int64(binary.BigEndian.Uint32(b[8:12]))
	u.Privileges = binary.BigEndian.Uint32(b[12:16])
	m := int(binary.BigEndian.Uint16(b[20:22]))
	b = b[22:]
	if len(b) != m {
		return u, ErrKeyMalformed
	}
	u.RoomID = string(b)
	return u, nil
}

// keyDoc is the signed JSON document, in the field order of Tencent's
// tls-sig-api-v2 (Go), so a key is byte for byte the one Tencent's
// library issues for the same inputs and time.
type keyDoc struct {
	Version    string `json:"TLS.ver"`
	Identifier string `json:"TLS.identifier"`
	SDKAppID   int64  `json:"TLS.sdkappid"`
	Expire     int64  `json:"TLS.expire"`
	Time       int64  `json:"TLS.time"`
	UserBuf    []byte `json:"TLS.userbuf,omitempty"` // JSON: standard base64
	Sig        string `json:"TLS.sig"`
}

// sign is the HMAC-SHA256, standard base64, of the five lines the key
// signs (the UserSig's four plus the record).
func (d keyDoc) sign(key string) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte("TLS.identifier:" + d.Identifier + "\n" +
		"TLS.sdkappid:" + strconv.FormatInt(d.SDKAppID, 10) + "\n" +
		"TLS.time:" + strconv.FormatInt(d.Time, 10) + "\n" +
		"TLS.expire:" + strconv.FormatInt(d.Expire, 10) + "\n"))
	if d.UserBuf != nil {
		h.Write([]byte("TLS.userbuf:" + base64.StdEncoding.EncodeToString(d.UserBuf) + "\n"))
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// GenPrivateMapKey issues the PrivateMapKey of userID for the string-id
// audio room roomID with the privilege bits, valid for ttl (whole
// seconds) from now: Tencent's GenPrivateMapKeyWithStringRoomID. key is
// the app's UserSig key (the TRTC/IM console's secret key, not a Cloud
// API key).
func GenPrivateMapKey(sdkAppID int64, key, userID, roomID string, privileges uint32, ttl time.Duration, now time.Time) (string, error) {
	exp := int64(ttl / time.Second)
	if exp <= 0 {
		return "", errors.New("privatemapkey: ttl must be at least one second")
	}
	if userID == "" || roomID == "" {
		return "", errors.New("privatemapkey: user id and room id are required")
	}
	if sdkAppID <= 0 || sdkAppID > 0xFFFFFFFF {
		return "", errors.New("privatemapkey: sdkappid out of range")
	}
	ub, err := UserBuf{UserID: userID, SDKAppID: uint32(sdkAppID), RoomID: roomID, ExpiresAt: now.Unix() + exp, Privileges: privileges}.Marshal()
	if err != nil {
		return "", err
	}
	doc := keyDoc{Version: "2.0", Identifier: userID, SDKAppID: sdkAppID, Expire: exp, Time: now.Unix(), UserBuf: ub}
	doc.Sig = doc.sign(key)
	// An Encoder, not Marshal: Tencent's library ends the document with
	// the Encoder's newline, and the vectors are its output.
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(doc); err != nil {
		return "", err
	}
	return tlssig.Encode(js.Bytes())
}

// VerifyPrivateMapKey checks a PrivateMapKey as TRTC does when advanced
// permission control is on: its signature under key, that it was issued
// to userID of sdkAppID for roomID and is not expired at now. It returns
// the record (the privilege bits) or one of the ErrKey* errors.
func VerifyPrivateMapKey(pmk string, sdkAppID int64, key, userID, roomID string, now time.Time) (UserBuf, error) {
	var doc keyDoc
	if err := tlssig.Decode(pmk, &doc); err != nil || doc.Sig == "" {
		return UserBuf{}, ErrKeyMalformed
	}
	if doc.UserBuf == nil {
		return UserBuf{}, ErrKeyNoUserBuf
	}
	if !hmac.Equal([]byte(doc.sign(key)), []byte(doc.Sig)) {
		return UserBuf{}, ErrKeySignature
	}
	ub, err := ParseUserBuf(doc.UserBuf)
	if err != nil {
		return UserBuf{}, err
	}
	if doc.SDKAppID != sdkAppID || int64(ub.SDKAppID) != sdkAppID {
		return ub, ErrKeyAppMismatch
	}
	if doc.Identifier != userID || ub.UserID != userID {
		return ub, ErrKeyUserMismatch
	}
	if ub.RoomID != roomID {
		return ub, ErrKeyRoomMismatch
	}
	if t := now.Unix(); t > doc.Time+doc.Expire || t > ub.ExpiresAt {
		return ub, ErrKeyExpired
	}
	return ub, nil
}
