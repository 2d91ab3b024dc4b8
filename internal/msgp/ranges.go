package msgp

import (
	"fmt"
	"reflect"
	"time"

	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

// The one msgpack codec of interval.Range, registered when this package
// is initialised: events and commands import it, so it is in place before
// any of their values is encoded or decoded. (Without it the reflective
// codec would write a Range as its text form.)
func init() {
	msgpack.Register(interval.Range{},
		func(enc *msgpack.Encoder, v reflect.Value) error {
			return EncodeRange(enc, v.Interface().(interval.Range))
		},
		func(dec *msgpack.Decoder, v reflect.Value) error {
			if !v.CanSet() {
				return fmt.Errorf("msgpack: Decode(nonaddressable %v)", v.Type())
			}
			r, err := DecodeRange(dec)
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(r))
			return nil
		})
}

// EncodeRange writes r as [start_unix_seconds, end_unix_seconds].
func EncodeRange(enc *msgpack.Encoder, r interval.Range) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := enc.EncodeInt(r.Start.Unix()); err != nil {
		return err
	}
	return enc.EncodeInt(r.End.Unix())
}

// DecodeRange reads [start_unix_seconds, end_unix_seconds] as a range in
// UTC; nil is the zero range.
func DecodeRange(dec *msgpack.Decoder) (interval.Range, error) {
	if Nil(dec) {
		return interval.Range{}, nil
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return interval.Range{}, err
	}
	if n != 2 {
		return interval.Range{}, fmt.Errorf("interval: range must be an array of 2 integers, got %d elements", n)
	}
	s, err := dec.DecodeInt64()
	if err != nil {
		return interval.Range{}, err
	}
	e, err := dec.DecodeInt64()
	if err != nil {
		return interval.Range{}, err
	}
	return interval.Range{Start: time.Unix(s, 0).UTC(), End: time.Unix(e, 0).UTC()}, nil
}

// Ranges writes key and a list of ranges (nil as nil, as the reflective
// encoder does).
func Ranges(enc *msgpack.Encoder, key string, rs []interval.Range) error {
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	if rs == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(rs)); err != nil {
		return err
	}
	for _, r := range rs {
		if err := EncodeRange(enc, r); err != nil {
			return err
		}
	}
	return nil
}

// DecodeRanges reads a list of ranges as the reflective decoder does: nil
// is a nil slice, an empty array an empty one, a nil element the zero
// range. The length in the header is not trusted for the allocation.
func DecodeRanges(dec *msgpack.Decoder) ([]interval.Range, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	rs := make([]interval.Range, 0, min(n, 64))
	for i := 0; i < n; i++ {
		r, err := DecodeRange(dec)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}
