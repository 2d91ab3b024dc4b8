package msgp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// MaxDepth is how deeply DuplicateKey follows nested arrays and maps. No
// command nests deeper than three levels.
const MaxDepth = 64

// ErrTooDeep is returned by DuplicateKey for values nested deeper than
// MaxDepth.
var ErrTooDeep = fmt.Errorf("msgp: nested deeper than %d levels", MaxDepth)

// DuplicateKey reports the first map key that appears twice in the same
// map, anywhere in the value data starts with, as a path: the key itself
// at the top level, "parent.key" inside a map, "list[3].key" inside an
// array; found is false when every map's keys are distinct. Keys compare
// as the decoders read them: a string and a binary with the same bytes,
// and nil and the empty string, are the same key. data must have passed
// Check. It allocates nothing for values of a few small maps.
func DuplicateKey(data []byte) (path string, found bool, err error) {
	type frame struct {
		left  int    // entries still to read (a map's keys and values both count)
		isMap bool   // else an array
		n     int    // entries read
		first int    // index in keys of this map's first key
		last  []byte // the key read last
		// via is how the parent reaches this value: its key, or its index.
		viaKey []byte
		viaIdx int
		viaMap bool
		big    map[string]struct{} // the keys, once there are many
	}
	var stackBuf [8]frame
	var keysBuf [32][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	pathOf := func(last []byte) string {
		var b strings.Builder
		// stack[0] is the root's pseudo array, stack[1] the top-level value.
		for i := 2; i < len(stack); i++ {
			f := stack[i]
			if f.viaMap {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.Write(f.viaKey)
			} else {
				b.WriteString("[" + strconv.Itoa(f.viaIdx) + "]")
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(last)
		return b.String()
	}
	// The root is the single entry of a pseudo array.
	stack = append(stack, frame{left: 1})
	pos := 0
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.left == 0 {
			keys = keys[:top.first]
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				p := &stack[len(stack)-1]
				p.left--
				p.n++
			}
			continue
		}
		if pos >= len(data) {
			return "", false, ErrTruncated
		}
		head, size, items, isMap, err := header(data[pos:])
		if err != nil {
			return "", false, err
		}
		value := data[pos : pos+head+size]
		isKey := top.isMap && top.n%2 == 0
		var key []byte
		if isKey {
			key = keyBytes(value, head)
			top.last = key
			if top.big != nil {
				if _, dup := top.big[string(key)]; dup {
					return pathOf(key), true, nil
				}
				top.big[string(key)] = struct{}{}
			} else {
				for _, k := range keys[top.first:] {
					if bytes.Equal(k, key) {
						return pathOf(key), true, nil
					}
				}
				keys = append(keys, key)
				if len(keys)-top.first > 16 {
					top.big = make(map[string]struct{}, 2*(len(keys)-top.first))
					for _, k := range keys[top.first:] {
						top.big[string(k)] = struct{}{}
					}
				}
			}
		}
		pos += head + size
		if items == 0 {
			top.left--
			top.n++
			continue
		}
		if len(stack) > MaxDepth {
			return "", false, ErrTooDeep
		}
		f := frame{left: items, isMap: isMap, first: len(keys)}
		if top.isMap {
			// A container value is reached by the key read just before it
			// (a container key has no name: it keeps the parent's path).
			f.viaMap = true
			if !isKey {
				f.viaKey = top.last
			}
		} else {
			f.viaIdx = top.n
		}
		stack = append(stack, f)
	}
	return "", false, nil
}

// keyBytes is what a map key reads as: a string's or binary's bytes, nil
// as the empty key, any other value as its encoding (the decoders refuse
// such keys anyway).
func keyBytes(v []byte, head int) []byte {
	c := v[0]
	switch {
	case c == 0xc0:
		return nil
	case c&0xe0 == 0xa0, c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
		return v[head:]
	}
	return v
}

// header reads the header of the value b starts with: its length, the
// payload bytes after it, the entries of a container (a map's keys and
// values both count) and whether it is a map.
func header(b []byte) (head, size, items int, isMap bool, err error) {
	c := b[0]
	head = 1
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c&0xf0 == 0x80:
		items, isMap = 2*int(c&0x0f), true
	case c&0xf0 == 0x90:
		items = int(c & 0x0f)
	case c&0xe0 == 0xa0:
		size = int(c & 0x1f)
	case c == 0xcc, c == 0xd0:
		size = 1
	case c == 0xcd, c == 0xd1:
		size = 2
	case c == 0xca, c == 0xce, c == 0xd2:
		size = 4
	case c == 0xcb, c == 0xcf, c == 0xd3:
		size = 8
	case c >= 0xd4 && c <= 0xd8:
		size = 1 + 1<<(c-0xd4)
	default:
		width, kind := lengthField(c)
		if width == 0 {
			return 0, 0, 0, false, fmt.Errorf("msgp: invalid code %#x", c)
		}
		if len(b) < 1+width {
			return 0, 0, 0, false, ErrTruncated
		}
		var l int
		switch width {
		case 1:
			l = int(b[1])
		case 2:
			l = int(binary.BigEndian.Uint16(b[1:]))
		default:
			l = int(binary.BigEndian.Uint32(b[1:]))
		}
		head += width
		switch kind {
		case 's':
			size = l
		case 'x':
			size = l + 1
		case 'a':
			items = l
		case 'm':
			items, isMap = 2*l, true
		}
	}
	if size > len(b)-head {
		return 0, 0, 0, false, ErrTruncated
	}
	return head, size, items, isMap, nil
}
