package events

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// DecodeErrorKind classifies decode failures.
type DecodeErrorKind string

// The decode error kinds.
const (
	// Malformed: the bytes are not a well-formed event.
	Malformed DecodeErrorKind = "malformed"
	// UnknownType: the envelope names a type this build does not know.
	UnknownType DecodeErrorKind = "unknown_type"
	// UnsupportedVersion: the event was written by a newer schema.
	UnsupportedVersion DecodeErrorKind = "unsupported_version"
	// OutOfRange: a time (Field names it) lies outside [MinTime, MaxTime].
	// The event was not written by this build's engine, which never
	// writes one.
	OutOfRange DecodeErrorKind = "out_of_range"
)

// ErrDecode is matched (errors.Is) by every *DecodeError.
var ErrDecode = errors.New("events: cannot decode event")

// DecodeError says why bytes could not be decoded into an Event.
type DecodeError struct {
	Kind    DecodeErrorKind
	Type    Type
	Version int
	// Field names the offending key (OutOfRange), e.g. "data.ranges[0].end".
	Field string
	Err   error
}

func (e *DecodeError) Error() string {
	switch e.Kind {
	case UnknownType:
		return fmt.Sprintf("events: unknown event type %q", e.Type)
	case UnsupportedVersion:
		return fmt.Sprintf("events: %s has schema version %d, newer than the supported %d", e.Type, e.Version, SchemaVersion)
	case OutOfRange:
		return fmt.Sprintf("events: %s: %v", e.Type, e.Err)
	}
	return fmt.Sprintf("events: malformed event: %v", e.Err)
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDecode) true.
func (e *DecodeError) Is(target error) bool { return target == ErrDecode }

// wire is the on-the-wire shape: the envelope fields plus the payload map
// under "data".
type wire struct {
	Envelope `msgpack:",inline"`
	Data     msgpack.RawMessage `msgpack:"data"`
	// payload, when set, is encoded as the data in place of Data.
	payload Payload
}

// Encode serialises an event with msgpack. An event with a time outside
// [MinTime, MaxTime] is refused (a *TimeRangeError): Decode would refuse it.
func Encode(e Event) ([]byte, error) {
	return AppendEncode(nil, e)
}

// AppendEncode appends Encode's bytes for e to dst, in one pass: the
// payload is written in place as the envelope's data, not encoded apart
// and copied in.
func AppendEncode(dst []byte, e Event) ([]byte, error) {
	if e.Payload == nil {
		return nil, errors.New("events: encode: nil payload")
	}
	if err := CheckTimes(e); err != nil {
		return nil, fmt.Errorf("events: encode %s: %w", e.Payload.EventType(), err)
	}
	w := wire{Envelope: e.Envelope, payload: e.Payload}
	w.Type = e.Payload.EventType()
	if w.Schema == 0 {
		w.Schema = SchemaVersion
	}
	buf := bytes.NewBuffer(dst)
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := w.EncodeMsgpack(enc)
	msgpack.PutEncoder(enc)
	if err != nil {
		return nil, fmt.Errorf("events: encode %s: %w", w.Type, err)
	}
	return buf.Bytes(), nil
}

// Decode parses bytes written by Encode (or by any client following
// docs/events.md). It returns a *DecodeError for malformed bytes, unknown
// types, newer schema versions and times outside [MinTime, MaxTime], and
// never panics.
func Decode(b []byte) (ev Event, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &DecodeError{Kind: Malformed, Err: fmt.Errorf("decoder panic: %v", r)}
		}
	}()
	if err := msgp.Check(b); err != nil {
		return Event{}, &DecodeError{Kind: Malformed, Err: err}
	}
	var w wire
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return Event{}, &DecodeError{Kind: Malformed, Err: err}
	}
	if w.Schema > SchemaVersion {
		return Event{}, &DecodeError{Kind: UnsupportedVersion, Type: w.Type, Version: w.Schema}
	}
	if w.Schema < 1 {
		return Event{}, &DecodeError{Kind: Malformed, Type: w.Type, Err: fmt.Errorf("schema version %d", w.Schema)}
	}
	p, err := decodePayload(w.Type, w.Data)
	if err != nil {
		return Event{}, err
	}
	w.Envelope.OccurredAt = w.Envelope.OccurredAt.UTC()
	ev = Event{Envelope: w.Envelope, Payload: p}
	if err := CheckTimes(ev); err != nil {
		var re *TimeRangeError
		errors.As(err, &re)
		return Event{}, &DecodeError{Kind: OutOfRange, Type: w.Type, Field: re.Field, Err: err}
	}
	return ev, nil
}

func decodePayload(t Type, data []byte) (Payload, error) {
	if len(data) == 0 {
		return nil, &DecodeError{Kind: Malformed, Type: t, Err: errors.New("missing data")}
	}
	// One wire form: every payload is a map (the reflective decoder would
	// also read a struct written as an array, by position).
	if !msgp.IsMap(data[0]) {
		return nil, &DecodeError{Kind: Malformed, Type: t, Err: fmt.Errorf("%s data: %w", t, msgp.NotMap(data[0]))}
	}
	into := func(v any) error {
		// data lies inside b, which Check already walked.
		if err := msgp.UnmarshalChecked(data, v); err != nil {
			return &DecodeError{Kind: Malformed, Type: t, Err: err}
		}
		return nil
	}
	var p Payload
	switch t {
	case TypeSnapshotRegistered:
		p = &SnapshotRegistered{}
	case TypePlanBuilt:
		p = &PlanBuilt{}
	case TypeIntervalsCompleted:
		p = &IntervalsCompleted{}
	case TypeIntervalsInvalidated:
		p = &IntervalsInvalidated{}
	case TypeSchedulerAdvanced:
		p = &SchedulerAdvanced{}
	case TypePromotionDecided:
		p = &PromotionDecided{}
	case TypeEnvironmentFinalized:
		p = &EnvironmentFinalized{}
	case TypeCatchUpRequested:
		p = &CatchUpRequested{}
	case TypeRepairCompleted:
		p = &RepairCompleted{}
	case TypeRunFailed:
		p = &RunFailed{}
	case TypeTableRetired:
		p = &TableRetired{}
	case TypePlanCancelled:
		p = &PlanCancelled{}
	case TypeAuditRecorded:
		p = &AuditRecorded{}
	case TypeEnvironmentRolledBack:
		p = &EnvironmentRolledBack{}
	case TypeRestatementRequested:
		p = &RestatementRequested{}
	default:
		return nil, &DecodeError{Kind: UnknownType, Type: t}
	}
	if err := into(p); err != nil {
		return nil, err
	}
	if n, ok := p.(interface{ normalize() }); ok {
		n.normalize()
	}
	return deref(p), nil
}

// deref turns the pointer decodePayload filled into the value type the rest
// of the code switches on.
func deref(p Payload) Payload {
	switch v := p.(type) {
	case *SnapshotRegistered:
		return *v
	case *PlanBuilt:
		return *v
	case *IntervalsCompleted:
		return *v
	case *IntervalsInvalidated:
		return *v
	case *SchedulerAdvanced:
		return *v
	case *PromotionDecided:
		return *v
	case *EnvironmentFinalized:
		return *v
	case *CatchUpRequested:
		return *v
	case *RepairCompleted:
		return *v
	case *RunFailed:
		return *v
	case *TableRetired:
		return *v
	case *PlanCancelled:
		return *v
	case *AuditRecorded:
		return *v
	case *EnvironmentRolledBack:
		return *v
	case *RestatementRequested:
		return *v
	}
	return p
}
