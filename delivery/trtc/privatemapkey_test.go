package trtc

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/internal/tlssig"
)

// vectorKey is the sample key of Tencent's tls-sig-api-v2 tests; the
// vectors in testdata/privatemapkey were issued with it by Tencent's own
// library (testdata/privatemapkey/gen.go says how).
const (
	vectorKey   = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e"
	vectorAppID = 1400000000
)

type vector struct {
	user, room string
	bits       uint32
	ttl        int64
	key        string
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/privatemapkey/vectors.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []vector
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			t.Fatalf("bad vector line %q", line)
		}
		bits, _ := strconv.ParseUint(f[2], 10, 32)
		ttl, _ := strconv.ParseInt(f[3], 10, 64)
		out = append(out, vector{f[0], f[1], uint32(bits), ttl, f[4]})
	}
	if len(out) < 3 {
		t.Fatalf("%d vectors", len(out))
	}
	return out
}

// decodeByHand opens a key without the package's code: the alphabet
// swapped back, zlib, JSON into a map.
func decodeByHand(t *testing.T, key string) map[string]any {
	t.Helper()
	std := strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(key)
	raw, err := base64.StdEncoding.DecodeString(std)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestPrivateMapKeyTencentVectors: for each key Tencent's library issued,
// ours for the same inputs at the same second is the same string; the
// record inside, read at fixed offsets, holds what was asked; the
// verifier accepts it for its user and room only.
func TestPrivateMapKeyTencentVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		doc := decodeByHand(t, v.key)
		issued := int64(doc["TLS.time"].(float64))
		got, err := GenPrivateMapKey(vectorAppID, vectorKey, v.user, v.room, v.bits, time.Duration(v.ttl)*time.Second, time.Unix(issued, 0))
		if err != nil {
			t.Fatal(err)
		}
		if got != v.key {
			t.Fatalf("%s/%s: key\n%s\nwant Tencent's\n%s", v.user, v.room, got, v.key)
		}
		if doc["TLS.ver"] != "2.0" || doc["TLS.identifier"] != v.user || doc["TLS.sdkappid"] != float64(vectorAppID) || doc["TLS.expire"] != float64(v.ttl) {
			t.Fatalf("document %v", doc)
		}
		ub, err := base64.StdEncoding.DecodeString(doc["TLS.userbuf"].(string))
		if err != nil {
			t.Fatal(err)
		}
		n := len(v.user)
		if ub[0] != 1 || int(binary.BigEndian.Uint16(ub[1:3])) != n || string(ub[3:3+n]) != v.user {
			t.Fatalf("record head % x", ub[:3+n])
		}
		rest := ub[3+n:]
		if binary.BigEndian.Uint32(rest[0:4]) != vectorAppID || binary.BigEndian.Uint32(rest[4:8]) != 0 ||
			int64(binary.BigEndian.Uint32(rest[8:12])) != issued+v.ttl || binary.BigEndian.Uint32(rest[12:16]) != v.bits ||
			binary.BigEndian.Uint32(rest[16:20]) != 0 || int(binary.BigEndian.Uint16(rest[20:22])) != len(v.room) || string(rest[22:]) != v.room {
			t.Fatalf("record body % x", rest)
		}
		at := time.Unix(issued+10, 0)
		rec, err := VerifyPrivateMapKey(v.key, vectorAppID, vectorKey, v.user, v.room, at)
		if err != nil || rec.Privileges != v.bits || rec.ExpiresAt != issued+v.ttl {
			t.Fatalf("verify %s: %+v %v", v.user, rec, err)
		}
		for name, c := range map[string]struct {
			app  int64
			key  string
			user string
			room string
			at   time.Time
			want error
		}{
			"other app":  {vectorAppID + 1, vectorKey, v.user, v.room, at, ErrKeyAppMismatch},
			"other key":  {vectorAppID, vectorKey + "x", v.user, v.room, at, ErrKeySignature},
			"other user": {vectorAppID, vectorKey, v.user + "x", v.room, at, ErrKeyUserMismatch},
			"other room": {vectorAppID, vectorKey, v.user, v.room + "x", at, ErrKeyRoomMismatch},
			"expired":    {vectorAppID, vectorKey, v.user, v.room, time.Unix(issued+v.ttl+1, 0), ErrKeyExpired},
		} {
			if _, err := VerifyPrivateMapKey(v.key, c.app, c.key, c.user, c.room, c.at); !errors.Is(err, c.want) {
				t.Fatalf("%s: %v, want %v", name, err, c.want)
			}
		}
	}
}

// TestPrivateMapKeyForged: a key whose record was edited (more rights)
// and re-encoded without the key fails the signature; a plain UserSig
// is no PrivateMapKey; garbage is malformed.
func TestPrivateMapKeyForged(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k, err := GenPrivateMapKey(vectorAppID, vectorKey, "alice", "app_r1", PrivilegeEnterRoom|PrivilegeReceiveAudio, 5*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	doc := decodeByHand(t, k)
	ub, _ := base64.StdEncoding.DecodeString(doc["TLS.userbuf"].(string))
	// Grant send audio in the record: the privilege word sits 12 bytes
	// after the user id.
	off := 3 + len("alice") + 12
	binary.BigEndian.PutUint32(ub[off:], PrivilegeEnterRoom|PrivilegeSendAudio|PrivilegeReceiveAudio)
	doc["TLS.userbuf"] = base64.StdEncoding.EncodeToString(ub)
	js, _ := json.Marshal(doc)
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(js)
	w.Close()
	forged := tlssig.Encoding.EncodeToString(b.Bytes())
	if _, err := VerifyPrivateMapKey(forged, vectorAppID, vectorKey, "alice", "app_r1", now); !errors.Is(err, ErrKeySignature) {
		t.Fatalf("forged record: %v", err)
	}
	delete(doc, "TLS.userbuf")
	js, _ = json.Marshal(doc)
	b.Reset()
	w = zlib.NewWriter(&b)
	w.Write(js)
	w.Close()
	if _, err := VerifyPrivateMapKey(tlssig.Encoding.EncodeToString(b.Bytes()), vectorAppID, vectorKey, "alice", "app_r1", now); !errors.Is(err, ErrKeyNoUserBuf) {
		t.Fatalf("no record: %v", err)
	}
	for _, bad := range []string{"", "!!!", "eAEA", tlssig.Encoding.EncodeToString([]byte("not zlib"))} {
		if _, err := VerifyPrivateMapKey(bad, vectorAppID, vectorKey, "alice", "app_r1", now); !errors.Is(err, ErrKeyMalformed) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := GenPrivateMapKey(vectorAppID, vectorKey, "alice", "app_r1", 2, 0, now); err == nil {
		t.Fatal("zero ttl accepted")
	}
	if _, err := GenPrivateMapKey(vectorAppID, vectorKey, "", "app_r1", 2, time.Minute, now); err == nil {
		t.Fatal("empty user accepted")
	}
}

// TestUserBufRoundTrip over random users, rooms and bits; truncated and
// padded records are refused.
func TestUserBufRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	str := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	for range 500 {
		u := UserBuf{UserID: str(1 + r.IntN(40)), SDKAppID: r.Uint32(), RoomID: str(1 + r.IntN(64)), ExpiresAt: int64(r.Uint32()), Privileges: uint32(r.IntN(256))}
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseUserBuf(b)
		if err != nil || got != u {
			t.Fatalf("%+v -> %+v %v", u, got, err)
		}
		if _, err := ParseUserBuf(b[:len(b)-1]); err == nil {
			t.Fatal("truncated record parsed")
		}
		if _, err := ParseUserBuf(append(b, 0)); err == nil {
			t.Fatal("padded record parsed")
		}
	}
}
