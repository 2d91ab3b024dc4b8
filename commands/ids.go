package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Command ids.
//
// A client's id is 1 to MaxIDLen bytes of letters, digits and
// '.', '_', '-', ':', '/', '@', '+', '=' (no space, nothing else: two ids
// that look alike are the same bytes). A retry reuses it; a new command
// needs a new one.
//
// Ids starting with InternalPrefix are reserved for the engine's own
// commands: "$<namespace>:<rest>" (the scheduler's ticks "$tick:…", the
// catch-up driver's strict retries "$catch-up-retry:…", the built-in
// worker's completions "$work:…"). Validate accepts them, so in-process
// callers may use them; Decode, the entry of every command that comes over
// the wire, refuses them, so no client can claim one.

// InternalPrefix starts every id in the engine's reserved namespace.
const InternalPrefix = "$"

// MaxInternalIDLen bounds an id in the reserved namespace (it may embed a
// name of MaxIDLen bytes and a time).
const MaxInternalIDLen = 512

// idByte reports whether b may appear in a client's command id.
func idByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("._-:/@+=", b) >= 0
}

func idChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// ValidClientID reports whether id is a well-formed client command id.
func ValidClientID(id string) bool { return len(id) <= MaxIDLen && idChars(id) }

// IsInternalID reports whether id is in the engine's reserved namespace.
func IsInternalID(id string) bool { return strings.HasPrefix(id, InternalPrefix) }

// validInternalID reports whether id is "$<namespace>:<rest>" with a
// namespace of lower-case letters and '-', and a rest of client id bytes.
func validInternalID(id string) bool {
	if len(id) > MaxInternalIDLen || !IsInternalID(id) {
		return false
	}
	ns, rest, ok := strings.Cut(id[len(InternalPrefix):], ":")
	if !ok || ns == "" || !idChars(rest) {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if (ns[i] < 'a' || ns[i] > 'z') && ns[i] != '-' {
			return false
		}
	}
	return true
}

// InternalID is the id of an engine command in namespace ns (lower-case
// letters and '-'): "$<ns>:<rest>".
func InternalID(ns, rest string) string { return InternalPrefix + ns + ":" + rest }

// validateID checks a command id (client or reserved: Decode refuses the
// latter from the wire).
func validateID(id string) error {
	switch {
	case id == "":
		return Errorf(CodeInvalid, "id", "command id is required")
	case IsInternalID(id):
		if !validInternalID(id) {
			return Errorf(CodeInvalid, "id", "command id %q: ids starting with %q are reserved for the engine's own commands", id, InternalPrefix)
		}
	case len(id) > MaxIDLen:
		return Errorf(CodeInvalid, "id", "command id is longer than %d bytes", MaxIDLen)
	case !idChars(id):
		return Errorf(CodeInvalid, "id", "command id %q: use letters, digits and . _ - : / @ + = only (no spaces)", id)
	}
	return nil
}

// refuseInternal refuses an id in the reserved namespace (commands that
// come over the wire).
func refuseInternal(cmd Command) error {
	if id := cmd.Header().ID; IsInternalID(id) {
		return Errorf(CodeInvalid, "id", "command id %q: ids starting with %q are reserved for the engine's own commands", id, InternalPrefix)
	}
	return nil
}

// Digest identifies what a command asks, whatever its id, actor, clock and
// correlation: the hex SHA-256 of its kind, a zero byte, and its msgpack
// encoding without its Meta (map keys sorted; an empty list or map is
// encoded as an absent one). The engine records it with the command's
// events (the envelope's digest), so a command id reused for another
// command (another kind or body) is told apart from a retry. A
// completion's rows are left out: they report what a computation wrote,
// not what the command asks, so a batch computed again (redelivered) that
// writes other rows is the same completion, recorded once; its audit
// outcomes likewise.
func Digest(cmd Command) string {
	// The hot path's commands, without reflection; the same bytes
	// (TestDigestFastPath).
	switch c := cmd.(type) {
	case *CompleteIntervals:
		v := *c
		v.Meta, v.Rows, v.Audits = Meta{}, 0, nil
		if len(v.Ranges) == 0 {
			v.Ranges = nil
		}
		return digestOf(c.Kind(), &v)
	case *CompleteWork:
		v := *c
		v.Meta, v.Rows, v.Audits = Meta{}, 0, nil // nothing else is cleared
		return digestOf(c.Kind(), &v)
	}
	return digestReflect(cmd)
}

// digestReflect is Digest for any command.
func digestReflect(cmd Command) string {
	v := reflect.New(reflect.TypeOf(cmd).Elem())
	v.Elem().Set(reflect.ValueOf(cmd).Elem())
	c := v.Interface().(Command)
	*c.Header() = Meta{}
	s := v.Elem()
	for i := 0; i < s.NumField(); i++ {
		if f := s.Field(i); (f.Kind() == reflect.Slice || f.Kind() == reflect.Map) && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return digestOf(c.Kind(), c)
}

// digestOf is the digest of the command c of kind, its Meta already
// cleared.
func digestOf(kind string, c any) string {
	var buf bytes.Buffer
	buf.WriteString(kind)
	buf.WriteByte(0)
	enc := msgpack.GetEncoder()
	enc.Reset(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(c); err != nil {
		// Every command type encodes; keep the digest defined anyway.
		buf.WriteString(err.Error())
	}
	msgpack.PutEncoder(enc)
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}
