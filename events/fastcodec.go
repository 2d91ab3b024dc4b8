package events

import (
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs for the envelope and IntervalsCompleted, the
// events of the command hot path, and for EnvironmentRolledBack (below),
// and their only codecs: they write the
// bytes the reflective encoder writes and read the maps it reads, without
// reflection (codec_test.go and FuzzDecode check both against a
// reflective oracle). A value that is not a map (a struct written as an
// array, which the reflective decoder would read) is an error: Decode
// reports it as Malformed.

// EncodeMsgpack implements msgpack.CustomEncoder.
func (w *wire) EncodeMsgpack(enc *msgpack.Encoder) error {
	e := &w.Envelope
	if err := enc.EncodeMapLen(msgp.Count(5, e.Causation != "", e.Correlation != "", e.Actor != "", e.Digest != "")); err != nil {
		return err
	}
	if err := msgp.String(enc, "id", e.ID); err != nil {
		return err
	}
	if err := msgp.String(enc, "type", string(e.Type)); err != nil {
		return err
	}
	if err := enc.EncodeString("schema"); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(e.Schema)); err != nil {
		return err
	}
	if err := enc.EncodeString("at"); err != nil {
		return err
	}
	if err := enc.EncodeTime(e.OccurredAt); err != nil {
		return err
	}
	for _, f := range [...]struct{ k, v string }{{"causation", e.Causation}, {"correlation", e.Correlation}, {"actor", e.Actor}, {"digest", e.Digest}} {
		if err := msgp.OptString(enc, f.k, f.v); err != nil {
			return err
		}
	}
	if err := enc.EncodeString("data"); err != nil {
		return err
	}
	if w.payload != nil {
		return enc.Encode(w.payload)
	}
	return w.Data.EncodeMsgpack(enc)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (w *wire) DecodeMsgpack(dec *msgpack.Decoder) error {
	e := &w.Envelope
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "id":
			e.ID, err = dec.DecodeString()
		case "type":
			var s string
			s, err = dec.DecodeString()
			e.Type = Type(s)
		case "schema":
			e.Schema, err = dec.DecodeInt()
		case "at":
			e.OccurredAt, err = msgp.Time(dec)
		case "causation":
			e.Causation, err = dec.DecodeString()
		case "correlation":
			e.Correlation, err = dec.DecodeString()
		case "actor":
			e.Actor, err = dec.DecodeString()
		case "digest":
			e.Digest, err = dec.DecodeString()
		case "data":
			if msgp.Nil(dec) {
				w.Data = nil
				return nil
			}
			w.Data, err = dec.DecodeRaw()
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("envelope: %w", err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p IntervalsCompleted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(msgp.Count(4, p.RunID != "", p.Work != "", p.Rows != 0)); err != nil {
		return err
	}
	if err := msgp.String(enc, "snapshot", p.Snapshot); err != nil {
		return err
	}
	if err := msgp.String(enc, "table", p.Table); err != nil {
		return err
	}
	if err := msgp.Ranges(enc, "ranges", p.Ranges); err != nil {
		return err
	}
	if err := msgp.String(enc, "run_kind", string(p.RunKind)); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "run_id", p.RunID); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "work", p.Work); err != nil {
		return err
	}
	return msgp.OptInt64(enc, "rows", p.Rows)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *IntervalsCompleted) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "snapshot":
			p.Snapshot, err = dec.DecodeString()
		case "table":
			p.Table, err = dec.DecodeString()
		case "ranges":
			p.Ranges, err = msgp.DecodeRanges(dec)
		case "run_kind":
			var s string
			s, err = dec.DecodeString()
			p.RunKind = RunKind(s)
		case "run_id":
			p.RunID, err = dec.DecodeString()
		case "work":
			p.Work, err = dec.DecodeString()
		case "rows":
			p.Rows, err = dec.DecodeInt64()
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("%s data: %w", TypeIntervalsCompleted, err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder: AuditRecorded is
// appended with every audited completion, on the hot path.
func (p AuditRecorded) EncodeMsgpack(enc *msgpack.Encoder) error {
	o := &p.AuditOutcome
	if err := enc.EncodeMapLen(msgp.Count(7, p.Work != "", len(o.Columns) > 0, len(o.Sample) > 0, o.Error != "")); err != nil {
		return err
	}
	if err := msgp.String(enc, "snapshot", p.Snapshot); err != nil {
		return err
	}
	if err := msgp.String(enc, "table", p.Table); err != nil {
		return err
	}
	if err := msgp.Ranges(enc, "ranges", p.Ranges); err != nil {
		return err
	}
	if err := enc.EncodeString("blocking"); err != nil {
		return err
	}
	if err := enc.EncodeBool(p.Blocking); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "work", p.Work); err != nil {
		return err
	}
	return encodeOutcomeFields(enc, o)
}

// encodeOutcomeFields writes an outcome's keys and values (its map header
// is the caller's): the reflective encoder's bytes.
func encodeOutcomeFields(enc *msgpack.Encoder, o *AuditOutcome) error {
	if err := msgp.String(enc, "audit", o.Audit); err != nil {
		return err
	}
	if err := enc.EncodeString("passed"); err != nil {
		return err
	}
	if err := enc.EncodeBool(o.Passed); err != nil {
		return err
	}
	if err := enc.EncodeString("count"); err != nil {
		return err
	}
	if err := enc.EncodeInt64(o.Count); err != nil {
		return err
	}
	if len(o.Columns) > 0 {
		if err := enc.EncodeString("columns"); err != nil {
			return err
		}
		if err := encodeStrings(enc, o.Columns); err != nil {
			return err
		}
	}
	if len(o.Sample) > 0 {
		if err := enc.EncodeString("sample"); err != nil {
			return err
		}
		if err := enc.EncodeArrayLen(len(o.Sample)); err != nil {
			return err
		}
		for _, row := range o.Sample {
			if err := encodeStrings(enc, row); err != nil {
				return err
			}
		}
	}
	return msgp.OptString(enc, "error", o.Error)
}

// encodeStrings writes a list of strings (nil as nil, as the reflective
// encoder does).
func encodeStrings(enc *msgpack.Encoder, ss []string) error {
	if ss == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(ss)); err != nil {
		return err
	}
	for _, s := range ss {
		if err := enc.EncodeString(s); err != nil {
			return err
		}
	}
	return nil
}

// decodeStrings reads a list of strings as the reflective decoder does:
// nil is a nil slice. The length in the header is not trusted for the
// allocation.
func decodeStrings(dec *msgpack.Decoder) ([]string, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]string, 0, min(n, 16))
	for i := 0; i < n; i++ {
		s, err := dec.DecodeString()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeOutcomeKey reads key into o if it is one of AuditOutcome's; ok
// says whether it was.
func decodeOutcomeKey(dec *msgpack.Decoder, o *AuditOutcome, key []byte) (ok bool, err error) {
	switch string(key) {
	case "audit":
		o.Audit, err = dec.DecodeString()
	case "passed":
		o.Passed, err = dec.DecodeBool()
	case "count":
		o.Count, err = dec.DecodeInt64()
	case "columns":
		o.Columns, err = decodeStrings(dec)
	case "sample":
		var n int
		if n, err = dec.DecodeArrayLen(); err != nil || n < 0 {
			o.Sample = nil
			return true, err
		}
		o.Sample = make([][]string, 0, min(n, MaxAuditSampleRows))
		for i := 0; i < n; i++ {
			row, err := decodeStrings(dec)
			if err != nil {
				return true, err
			}
			o.Sample = append(o.Sample, row)
		}
	case "error":
		o.Error, err = dec.DecodeString()
	default:
		return false, nil
	}
	return true, err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *AuditRecorded) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		if ok, err := decodeOutcomeKey(dec, &p.AuditOutcome, k); ok {
			return err
		}
		var err error
		switch string(k) {
		case "snapshot":
			p.Snapshot, err = dec.DecodeString()
		case "table":
			p.Table, err = dec.DecodeString()
		case "ranges":
			p.Ranges, err = msgp.DecodeRanges(dec)
		case "blocking":
			p.Blocking, err = dec.DecodeBool()
		case "work":
			p.Work, err = dec.DecodeString()
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("%s data: %w", TypeAuditRecorded, err)
	}
	return err
}

// EncodeAuditOutcomes writes key and a list of outcomes, the reflective
// encoder's bytes (a command's audits: commands' hand-written codec).
func EncodeAuditOutcomes(enc *msgpack.Encoder, key string, os []AuditOutcome) error {
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	if os == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(os)); err != nil {
		return err
	}
	for i := range os {
		o := &os[i]
		if err := enc.EncodeMapLen(msgp.Count(3, len(o.Columns) > 0, len(o.Sample) > 0, o.Error != "")); err != nil {
			return err
		}
		if err := encodeOutcomeFields(enc, o); err != nil {
			return err
		}
	}
	return nil
}

// DecodeAuditOutcomes reads a list of outcomes written as EncodeAuditOutcomes
// writes them (nil is a nil slice). An unknown key of an outcome is an
// error, as a command's strict decode asks; an outcome that is not a map
// is one matching msgp.ErrNotMap. The length in the header is not trusted
// for the allocation.
func DecodeAuditOutcomes(dec *msgpack.Decoder) ([]AuditOutcome, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]AuditOutcome, 0, min(n, MaxAudits))
	for i := 0; i < n; i++ {
		var o AuditOutcome
		err := msgp.Map(dec, func(k []byte) error {
			if ok, err := decodeOutcomeKey(dec, &o, k); ok {
				return err
			}
			return fmt.Errorf("msgpack: unknown field %q in audits[%d]", k, i)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// The rollback's hand-written codecs: EnvironmentRolledBack and its two
// element types (which the reflective oracle then shares, so a slice of
// them decodes alike both ways). Unknown keys are skipped, as the
// reflective decoder does for events.

func uint64Field(enc *msgpack.Encoder, key string, v uint64) error {
	if err := enc.EncodeString(key); err != nil {
		return err
	}
	return enc.EncodeUint64(v)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (m RolledBackModel) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(4); err != nil {
		return err
	}
	for _, f := range [...]struct{ k, v string }{{"model", m.Model}, {"restored", m.Restored}, {"table", m.Table}, {"demoted", m.Demoted}} {
		if err := msgp.String(enc, f.k, f.v); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder. The value is reset
// first: a slice decoded again over an older one reuses its elements.
func (m *RolledBackModel) DecodeMsgpack(dec *msgpack.Decoder) error {
	*m = RolledBackModel{}
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "model":
			m.Model, err = dec.DecodeString()
		case "restored":
			m.Restored, err = dec.DecodeString()
		case "table":
			m.Table, err = dec.DecodeString()
		case "demoted":
			m.Demoted, err = dec.DecodeString()
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("RolledBackModel: %w", err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r RolledBackRepair) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(4); err != nil {
		return err
	}
	for _, f := range [...]struct{ k, v string }{{"plan", r.Plan}, {"model", r.Model}, {"snapshot", r.Snapshot}} {
		if err := msgp.String(enc, f.k, f.v); err != nil {
			return err
		}
	}
	return uint64Field(enc, "open_seq", r.OpenSeq)
}

// DecodeMsgpack implements msgpack.CustomDecoder (reset first, as
// RolledBackModel's).
func (r *RolledBackRepair) DecodeMsgpack(dec *msgpack.Decoder) error {
	*r = RolledBackRepair{}
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "plan":
			r.Plan, err = dec.DecodeString()
		case "model":
			r.Model, err = dec.DecodeString()
		case "snapshot":
			r.Snapshot, err = dec.DecodeString()
		case "open_seq":
			r.OpenSeq, err = dec.DecodeUint64()
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("RolledBackRepair: %w", err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p EnvironmentRolledBack) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(msgp.Count(7, len(p.Repairs) > 0)); err != nil {
		return err
	}
	if err := msgp.String(enc, "env", p.Env); err != nil {
		return err
	}
	for _, f := range [...]struct {
		k string
		v uint64
	}{{"from_generation", p.FromGeneration}, {"to_generation", p.ToGeneration}, {"generation", p.Generation}} {
		if err := uint64Field(enc, f.k, f.v); err != nil {
			return err
		}
	}
	if err := enc.EncodeString("models"); err != nil {
		return err
	}
	if err := encodeSlice(enc, p.Models); err != nil {
		return err
	}
	if len(p.Repairs) > 0 {
		if err := enc.EncodeString("repairs"); err != nil {
			return err
		}
		if err := encodeSlice(enc, p.Repairs); err != nil {
			return err
		}
	}
	if err := uint64Field(enc, "evaluated_at_seq", p.EvaluatedAtSeq); err != nil {
		return err
	}
	if err := enc.EncodeString("evaluated_at"); err != nil {
		return err
	}
	return enc.EncodeTime(p.EvaluatedAt)
}

// encodeSlice writes s as the reflective encoder does: nil as nil, else
// an array of its elements' own codecs.
func encodeSlice[T msgpack.CustomEncoder](enc *msgpack.Encoder, s []T) error {
	if s == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(s)); err != nil {
		return err
	}
	for _, v := range s {
		if err := v.EncodeMsgpack(enc); err != nil {
			return err
		}
	}
	return nil
}

// decodeSlice reads what encodeSlice writes, as the reflective decoder
// does into a new slice: nil as nil, an empty array as an empty slice,
// each element with its own codec (via dec, so nil is its zero value).
func decodeSlice[T any](dec *msgpack.Decoder) ([]T, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n == -1 {
		return nil, err
	}
	out := make([]T, n) // Check bounded n by the bytes that follow
	for i := range out {
		if err := dec.Decode(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *EnvironmentRolledBack) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "env":
			p.Env, err = dec.DecodeString()
		case "from_generation":
			p.FromGeneration, err = dec.DecodeUint64()
		case "to_generation":
			p.ToGeneration, err = dec.DecodeUint64()
		case "generation":
			p.Generation, err = dec.DecodeUint64()
		case "models":
			p.Models, err = decodeSlice[RolledBackModel](dec)
		case "repairs":
			p.Repairs, err = decodeSlice[RolledBackRepair](dec)
		case "evaluated_at_seq":
			p.EvaluatedAtSeq, err = dec.DecodeUint64()
		case "evaluated_at":
			p.EvaluatedAt, err = msgp.Time(dec)
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return fmt.Errorf("%s data: %w", TypeEnvironmentRolledBack, err)
	}
	return err
}
