// Package msgp holds the helpers of the hand-written msgpack codecs of the
// hot-path types (events.IntervalsCompleted, the event envelope, the
// complete_intervals command, the command reply) and the one codec of
// interval.Range, registered with msgpack when this package is
// initialised. The hot-path codecs are the only codecs of their types:
// they write the bytes the reflective msgpack encoder writes and read the
// maps it reads (a value that is not a map is an error, ErrNotMap); the
// tests of each type check both against a reflective oracle.
//
// Importers: events, commands.
package msgp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrNotMap is matched (errors.Is) by Map's error for a value that is
// neither a map nor nil. The hand-written codecs read maps only: a struct
// written as an array, which the reflective decoder would also read, is
// malformed.
var ErrNotMap = errors.New("msgp: not a map")

// Map reads a map header and calls field for each key, with the decoder
// positioned on the key's value; field must consume it (dec.Skip() for a
// key it does not know). The key is only valid during the call (switch on
// string(key): that does not allocate). A nil value is an empty map. A
// value that is not a map is left unread and reported as an error
// matching ErrNotMap that names what the value is.
func Map(dec *msgpack.Decoder, field func(key []byte) error) error {
	c, err := dec.PeekCode()
	if err != nil {
		return err
	}
	if c != msgpcode.Nil && !IsMap(c) {
		return NotMap(c)
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	var scratch [32]byte
	for i := 0; i < n; i++ {
		k, err := key(dec, scratch[:0])
		if err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
	}
	return nil
}

// key reads a map key (a string, or nil for the empty one) into buf when
// it fits, without allocating. A longer key is read in chunks: its header
// is not trusted for the allocation.
func key(dec *msgpack.Decoder, buf []byte) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil || n <= 0 {
		return buf[:0], err
	}
	if n <= cap(buf) {
		buf = buf[:n]
		return buf, dec.ReadFull(buf)
	}
	out := buf[:0]
	for len(out) < n {
		start := len(out)
		out = append(out, make([]byte, min(n-start, 64<<10))...)
		if err := dec.ReadFull(out[start:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// IsMap reports whether c starts a msgpack map (fixmap, map16 or map32).
func IsMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

// NotMap is the error, matching ErrNotMap, for a value starting with code
// c where a map was wanted: it names what the value is.
func NotMap(c byte) error { return fmt.Errorf("%w: got %s (code %#x)", ErrNotMap, kindOf(c), c) }

// kindOf names the kind of msgpack value c starts.
func kindOf(c byte) string {
	switch {
	case IsMap(c):
		return "a map"
	case msgpcode.IsFixedArray(c), c == msgpcode.Array16, c == msgpcode.Array32:
		return "an array"
	case msgpcode.IsString(c):
		return "a string"
	case msgpcode.IsBin(c):
		return "binary"
	case msgpcode.IsExt(c):
		return "an extension"
	case c == msgpcode.True, c == msgpcode.False:
		return "a bool"
	case c == msgpcode.Float, c == msgpcode.Double:
		return "a float"
	case c == msgpcode.Nil:
		return "nil"
	case c == 0xc1:
		return "an invalid code"
	}
	return "an integer"
}

// Time reads a timestamp field as the reflective decoder does: the
// timestamp extension (-1) and nothing else, nil included (the reflective
// decoder panics on a nil time.Time field; DecodeTime alone would also
// read ext 13 and the legacy array and string forms).
func Time(dec *msgpack.Decoder) (time.Time, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return time.Time{}, err
	}
	if !msgpcode.IsExt(c) {
		return time.Time{}, fmt.Errorf("msgpack: invalid code=%x decoding a timestamp", c)
	}
	id, n, err := dec.DecodeExtHeader()
	if err != nil {
		return time.Time{}, err
	}
	if id != -1 {
		return time.Time{}, fmt.Errorf("msgpack: got ext type=%d, wanted -1", id)
	}
	var b [12]byte
	if n != 4 && n != 8 && n != 12 {
		return time.Time{}, fmt.Errorf("msgpack: invalid ext len=%d decoding time", n)
	}
	if err := dec.ReadFull(b[:n]); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	switch n {
	case 4:
		t = time.Unix(int64(binary.BigEndian.Uint32(b[:4])), 0)
	case 8:
		v := binary.BigEndian.Uint64(b[:8])
		t = time.Unix(int64(v&0x00000003ffffffff), int64(v>>34))
	case 12:
		t = time.Unix(int64(binary.BigEndian.Uint64(b[4:12])), int64(binary.BigEndian.Uint32(b[:4])))
	}
	if t.IsZero() {
		t = t.UTC()
	}
	return t, nil
}

// Nil consumes a nil value and reports whether there was one.
func Nil(dec *msgpack.Decoder) bool {
	if c, err := dec.PeekCode(); err == nil && c == msgpcode.Nil {
		_ = dec.DecodeNil()
		return true
	}
	return false
}

// String writes key and value.
func String(enc *msgpack.Encoder, key, v string) error {
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	return enc.EncodeString(v)
}

// OptString writes key and value unless the value is empty (omitempty).
func OptString(enc *msgpack.Encoder, key, v string) error {
	if v == "" {
		return nil
	}
	return String(enc, key, v)
}

// OptInt64 writes key and value unless the value is 0 (omitempty).
func OptInt64(enc *msgpack.Encoder, key string, v int64) error {
	if v == 0 {
		return nil
	}
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	return enc.EncodeInt(v)
}

// Count returns how many of the flags are set: the size of a map whose
// optional entries are the flags.
func Count(always int, optional ...bool) int {
	n := always
	for _, o := range optional {
		if o {
			n++
		}
	}
	return n
}

// Unmarshal decodes data into v with a decoder of its own. Use it instead
// of msgpack.Unmarshal on bytes from outside: msgpack.Unmarshal takes a
// pooled decoder, and a value whose header claims more bytes than there
// are leaves that decoder's buffer a megabyte larger each time (msgpack
// v5.4.1 readNGrow), so hostile input grows the pool without bound.
// Bytes that fail Check are refused before decoding.
func Unmarshal(data []byte, v any) error {
	if err := Check(data); err != nil {
		return err
	}
	return UnmarshalChecked(data, v)
}

// UnmarshalChecked is Unmarshal for bytes Check has already accepted, as
// part of a larger value (an event's payload inside its checked envelope).
// It takes a pooled decoder (Decoder): Check bounds every length by the
// bytes that follow, so no decode grows the pool's buffers beyond the
// largest message decoded.
func UnmarshalChecked(data []byte, v any) error {
	return Decoder(data, func(dec *msgpack.Decoder, _ *bytes.Reader) error { return dec.Decode(v) })
}

// Decoder runs fn with a pooled decoder reading data through r, with
// default settings (no preallocation from the lengths a value claims),
// and gives it back to the pool. Call it only on bytes Check accepted.
func Decoder(data []byte, fn func(dec *msgpack.Decoder, r *bytes.Reader) error) error {
	dec := msgpack.GetDecoder()
	r := bytes.NewReader(data)
	dec.Reset(r)
	err := fn(dec, r)
	msgpack.PutDecoder(dec)
	return err
}
