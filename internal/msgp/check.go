package msgp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrTruncated is returned by Check for bytes that end inside a value, or
// whose lengths claim more than there is.
var ErrTruncated = errors.New("msgp: truncated value")

// Check verifies that data starts with one complete msgpack value whose
// every declared length fits in the bytes that follow: a string, binary or
// extension no longer than what remains, an array or map with no more
// entries than bytes remain (each needs at least one). It allocates
// nothing and ignores bytes after the value.
//
// Decoders rely on it: msgpack v5.4.1 allocates a slice as long as an
// array header claims (growSliceValue's limit is never applied), so a few
// hostile bytes could claim gigabytes. After Check no claim exceeds the
// input.
func Check(data []byte) error {
	pos, pending := 0, 1 // pending: values still to read
	for pending > 0 {
		if pending > len(data)-pos {
			return ErrTruncated
		}
		c := data[pos]
		pos++
		pending--
		size, items := 0, 0 // payload bytes after the header; container entries
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixints, nil, bools
		case c&0xf0 == 0x80: // fixmap
			items = 2 * int(c&0x0f)
		case c&0xf0 == 0x90: // fixarray
			items = int(c & 0x0f)
		case c&0xe0 == 0xa0: // fixstr
			size = int(c & 0x1f)
		case c == 0xcc, c == 0xd0: // uint8, int8
			size = 1
		case c == 0xcd, c == 0xd1: // uint16, int16
			size = 2
		case c == 0xca, c == 0xce, c == 0xd2: // float32, uint32, int32
			size = 4
		case c == 0xcb, c == 0xcf, c == 0xd3: // float64, uint64, int64
			size = 8
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 (+ the type byte)
			size = 1 + 1<<(c-0xd4)
		default:
			width, kind := lengthField(c)
			if width == 0 {
				return fmt.Errorf("msgp: invalid code %#x at byte %d", c, pos-1)
			}
			if len(data)-pos < width {
				return ErrTruncated
			}
			var l int
			switch width {
			case 1:
				l = int(data[pos])
			case 2:
				l = int(binary.BigEndian.Uint16(data[pos:]))
			default:
				l = int(binary.BigEndian.Uint32(data[pos:]))
			}
			pos += width
			switch kind {
			case 's': // str, bin
				size = l
			case 'x': // ext: + the type byte
				size = l + 1
			case 'a':
				items = l
			case 'm':
				items = 2 * l
			}
		}
		if size > len(data)-pos {
			return ErrTruncated
		}
		pos += size
		pending += items
	}
	return nil
}

// lengthField gives, for a length-prefixed code, the width of its length
// field and what the length counts: 's' bytes of a string or binary, 'x'
// bytes of an extension, 'a' array entries, 'm' map pairs. Width 0: not a
// valid code (0xc1).
func lengthField(c byte) (width int, kind byte) {
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		return 1, 's'
	case 0xc5, 0xda:
		return 2, 's'
	case 0xc6, 0xdb:
		return 4, 's'
	case 0xc7, 0xc8, 0xc9: // ext8, ext16, ext32
		return 1 << (c - 0xc7), 'x'
	case 0xdc, 0xdd: // array16, array32
		return 2 << (c - 0xdc), 'a'
	case 0xde, 0xdf: // map16, map32
		return 2 << (c - 0xde), 'm'
	}
	return 0, 0
}
