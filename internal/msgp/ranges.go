package msgp

import (
	"github.com/tidemark/tidemark/events/interval"
	"github.com/vmihailenco/msgpack/v5"
)

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
		if err := r.EncodeMsgpack(enc); err != nil {
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
		var r interval.Range
		if !Nil(dec) {
			if err := r.DecodeMsgpack(dec); err != nil {
				return nil, err
			}
		}
		rs = append(rs, r)
	}
	return rs, nil
}
