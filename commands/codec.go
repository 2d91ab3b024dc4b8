package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
	ct := strings.ToLower(strings.TrimSpace(contentType))
	return strings.HasPrefix(ct, ContentJSON) || strings.HasSuffix(strings.SplitN(ct, ";", 2)[0], "+json")
}

// Decode parses a command body of the given kind. contentType selects JSON
// or msgpack (empty means msgpack). Unknown fields are an error naming them.
// The decoded command is validated.
func Decode(kind string, contentType string, body []byte) (Command, error) {
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

func decodeJSON(body []byte, cmd Command) (err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cmd); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Errorf(CodeMalformed, te.Field, "wrong type: want %s", te.Type)
		}
		if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
			f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			return Errorf(CodeMalformed, f, "unknown field %q", f)
		}
		return Errorf(CodeMalformed, fieldOf(err), "invalid JSON: %v", err)
	}
	if dec.More() {
		return Errorf(CodeMalformed, "", "trailing data after the JSON object")
	}
	return nil
}

func decodeMsgpack(body []byte, cmd Command) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Errorf(CodeMalformed, "", "invalid msgpack: %v", r)
		}
	}()
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(cmd); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "unknown field "); i >= 0 {
			f := strings.Trim(strings.TrimSpace(msg[i+len("unknown field "):]), `"`)
			return Errorf(CodeMalformed, f, "unknown field %q", f)
		}
		return Errorf(CodeMalformed, fieldOf(err), "invalid msgpack: %v", err)
	}
	return nil
}

// fieldOf extracts a field name from range and time parse errors.
func fieldOf(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "range ") {
		return "ranges"
	}
	return ""
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
		err = msgpack.Unmarshal(body, &r)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("commands: decode reply: %w", err)
	}
	if r.Decision != nil {
		r.Decision.EvaluatedAt = r.Decision.EvaluatedAt.UTC()
	}
	return r, nil
}
