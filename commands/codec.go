package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// Content types accepted on commands.
const (
	ContentMsgpack = "application/msgpack"
	ContentJSON    = "application/json"
	// HeaderContentType is the NATS header naming the body encoding.
	HeaderContentType = "Content-Type"
)

// IsJSON reports whether a Content-Type header value selects JSON.
func IsJSON(contentType string) bool {
	switch contentType {
	case "", ContentMsgpack:
		return false
	case ContentJSON:
		return true
	}
	ct := strings.ToLower(strings.TrimSpace(contentType))
	return strings.HasPrefix(ct, ContentJSON) || strings.HasSuffix(strings.SplitN(ct, ";", 2)[0], "+json")
}

// Decode parses a command body of the given kind. contentType selects JSON
// or msgpack (empty means msgpack). Unknown fields, and keys given twice
// in one object or map, are an error naming them. The decoded command is
// validated, and an id in the engine's reserved namespace refused: Decode
// is the entry of every command from the wire.
func Decode(kind string, contentType string, body []byte) (Command, error) {
	cmd, err := DecodeForwarded(kind, contentType, body)
	if err != nil {
		return nil, err
	}
	if err := refuseInternal(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

// DecodeForwarded is Decode for a command one engine forwards to the
// writer, within the engine's own account (never from a client): it
// accepts the engine's own reserved ids, which the forwarding engine
// issued itself or took from the wire only after Decode's refusal.
func DecodeForwarded(kind string, contentType string, body []byte) (Command, error) {
	if len(body) > MaxBodyBytes {
		return nil, Errorf(CodeTooLarge, "", "body is %d bytes, more than the %d allowed", len(body), MaxBodyBytes)
	}
	cmd, err := New(kind)
	if err != nil {
		return nil, err
	}
	if _, query := cmd.(Query); query && len(body) == 0 {
		return cmd, cmd.Validate()
	}
	if len(body) == 0 {
		return nil, Errorf(CodeMalformed, "", "empty body")
	}
	if IsJSON(contentType) {
		err = decodeJSON(body, cmd)
	} else {
		if ct := strings.TrimSpace(contentType); ct != "" && !strings.HasPrefix(strings.ToLower(ct), ContentMsgpack) {
			return nil, Errorf(CodeMalformed, "Content-Type", "unsupported content type %q: use %s or %s", ct, ContentMsgpack, ContentJSON)
		}
		err = decodeMsgpack(body, cmd)
	}
	if err != nil {
		return nil, err
	}
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// decodeJSON decodes a JSON object into cmd key by key, so an error names
// the key that caused it.
func decodeJSON(body []byte, cmd Command) error {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return Errorf(CodeMalformed, "", "invalid JSON: want one object: %v", err)
	}
	// Only JSON whitespace may follow (Decoder.More alone would let a
	// stray ']' or '}' through).
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return Errorf(CodeMalformed, "", "trailing data after the JSON object")
	}
	if err := checkKeys(body, true); err != nil {
		return err
	}
	known := fieldNames(cmd, "json")
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !known[k] {
			return Errorf(CodeMalformed, k, "unknown field %q", k)
		}
		one, _ := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		// Unknown keys of nested objects (an audit, an audit outcome) are
		// refused too, as the msgpack decoder refuses them.
		dec := json.NewDecoder(bytes.NewReader(one))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cmd); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return Errorf(CodeMalformed, k, "wrong type: want %s", te.Type)
			}
			return Errorf(CodeMalformed, k, "%v", err)
		}
	}
	return nil
}

// decodeMsgpack decodes a msgpack map into cmd. A well-formed body takes
// one strict pass (unknown fields refused); any failure decodes it again
// key by key, so the error names the key that caused it.
func decodeMsgpack(body []byte, cmd Command) error {
	if err := msgp.Check(body); err != nil {
		return Errorf(CodeMalformed, "", "invalid msgpack: %v", err)
	}
	if err := checkKeys(body, false); err != nil {
		return err
	}
	// Maps only: msgpack would also decode an array into a struct, by
	// position, where the key-by-key decode refuses it.
	if msgp.IsMap(body[0]) && decodeStrict(body, cmd) == nil {
		return nil
	}
	// Start again from a clean command: the strict pass may have set
	// fields before it failed.
	v := reflect.ValueOf(cmd).Elem()
	v.Set(reflect.Zero(v.Type()))
	return decodeMsgpackKeys(body, cmd)
}

// decodeMsgpackKeys decodes a msgpack map into cmd key by key, so an error
// names the key that caused it.
func decodeMsgpackKeys(body []byte, cmd Command) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Errorf(CodeMalformed, "", "invalid msgpack: %v", r)
		}
	}()
	if err := msgp.Check(body); err != nil {
		return Errorf(CodeMalformed, "", "invalid msgpack: %v", err)
	}
	if err := checkKeys(body, false); err != nil {
		return err
	}
	var fields map[string]msgpack.RawMessage
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return Errorf(CodeMalformed, "", "invalid msgpack: want one map with string keys: %v", err)
	}
	known := fieldNames(cmd, "msgpack")
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !known[k] {
			return Errorf(CodeMalformed, k, "unknown field %q", k)
		}
		one, err := msgpack.Marshal(map[string]msgpack.RawMessage{k: fields[k]})
		if err != nil {
			return Errorf(CodeMalformed, k, "%v", err)
		}
		// Unknown keys of nested objects (a registration of a set, an
		// audit) are refused too, as decodeStrict refuses them.
		if err := msgp.Decoder(one, func(dec *msgpack.Decoder, _ *bytes.Reader) error {
			dec.DisallowUnknownFields(true)
			return dec.Decode(cmd)
		}); err != nil {
			return Errorf(CodeMalformed, k, "%v", err)
		}
	}
	return nil
}

// decodeStrict decodes body into cmd in one pass, refusing unknown fields
// and trailing bytes. A panic in the decoder is an error too.
func decodeStrict(body []byte, cmd Command) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	// The caller checked body (msgp.Check): a pooled decoder is safe.
	return msgp.Decoder(body, func(dec *msgpack.Decoder, r *bytes.Reader) error {
		dec.DisallowUnknownFields(true)
		if err := dec.Decode(cmd); err != nil {
			return err
		}
		if r.Len() > 0 {
			return errors.New("trailing bytes")
		}
		return nil
	})
}

// fieldNameCache holds fieldNames results by type and tag.
var fieldNameCache sync.Map // fieldNameKey → map[string]bool

type fieldNameKey struct {
	t   reflect.Type
	tag string
}

// fieldNames lists the wire names (by the given struct tag) of a command's
// fields, inline structs included. The result is shared: do not modify it.
func fieldNames(cmd Command, tag string) map[string]bool {
	key := fieldNameKey{reflect.TypeOf(cmd), tag}
	if m, ok := fieldNameCache.Load(key); ok {
		return m.(map[string]bool)
	}
	out := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name := strings.Split(f.Tag.Get(tag), ",")[0]
			if name == "" || name == "-" {
				name = f.Name
			}
			out[name] = true
		}
	}
	walk(reflect.TypeOf(cmd).Elem())
	fieldNameCache.Store(key, out)
	return out
}

// Encode serialises a command (msgpack unless asJSON).
func Encode(cmd Command, asJSON bool) ([]byte, error) {
	if asJSON {
		return json.Marshal(cmd)
	}
	return msgpack.Marshal(cmd)
}

// EncodeReply serialises a reply in the request's encoding.
func EncodeReply(r Reply, asJSON bool) ([]byte, error) {
	if asJSON {
		return json.Marshal(r)
	}
	return msgpack.Marshal(r)
}

// DecodeReply parses a reply.
func DecodeReply(body []byte, asJSON bool) (Reply, error) {
	var r Reply
	var err error
	if asJSON {
		err = json.Unmarshal(body, &r)
	} else {
		err = msgp.Unmarshal(body, &r)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("commands: decode reply: %w", err)
	}
	if r.Decision != nil {
		r.Decision.EvaluatedAt = r.Decision.EvaluatedAt.UTC()
	}
	return r, nil
}
