package commands

import (
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/events"
	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs for complete_intervals and the reply, the
// command hot path, and rollback, and their only codecs: they write the bytes the
// reflective encoder writes and read the maps it reads, without reflection
// (fastcodec_test.go and FuzzDecode check both against a reflective
// oracle). complete_intervals refuses unknown keys, as Decode's strict
// pass asks. A value that is not a map (a struct written as an array,
// which the reflective decoder would read) is a malformed *Error.

func encodeMeta(enc *msgpack.Encoder, m *Meta) error {
	if err := msgp.String(enc, "id", m.ID); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "actor", m.Actor); err != nil {
		return err
	}
	if !m.At.IsZero() {
		if err := enc.EncodeString("at"); err != nil {
			return err
		}
		if err := enc.EncodeTime(m.At); err != nil {
			return err
		}
	}
	if err := msgp.OptString(enc, "correlation", m.Correlation); err != nil {
		return err
	}
	if m.AfterSeq != 0 {
		if err := enc.EncodeString("after_seq"); err != nil {
			return err
		}
		return enc.EncodeUint64(m.AfterSeq)
	}
	return nil
}

// decodeMeta reads key into m if it is one of Meta's; ok says whether it was.
func decodeMeta(dec *msgpack.Decoder, m *Meta, key []byte) (ok bool, err error) {
	switch string(key) {
	case "id":
		m.ID, err = dec.DecodeString()
	case "actor":
		m.Actor, err = dec.DecodeString()
	case "at":
		m.At, err = msgp.Time(dec)
	case "correlation":
		m.Correlation, err = dec.DecodeString()
	case "after_seq":
		m.AfterSeq, err = dec.DecodeUint64()
	default:
		return false, nil
	}
	return true, err
}

func metaFields(m *Meta) int {
	return msgp.Count(1, m.Actor != "", !m.At.IsZero(), m.Correlation != "", m.AfterSeq != 0)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (c CompleteIntervals) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(metaFields(&c.Meta) + msgp.Count(3, c.RunKind != "", c.RunID != "", c.Work != "", c.Rows != 0, len(c.Audits) > 0)); err != nil {
		return err
	}
	if err := encodeMeta(enc, &c.Meta); err != nil {
		return err
	}
	if err := msgp.String(enc, "model", c.Model); err != nil {
		return err
	}
	if err := msgp.String(enc, "version", c.Version); err != nil {
		return err
	}
	if err := msgp.Ranges(enc, "ranges", c.Ranges); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "run_kind", string(c.RunKind)); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "run_id", c.RunID); err != nil {
		return err
	}
	if err := msgp.OptString(enc, "work", c.Work); err != nil {
		return err
	}
	if err := msgp.OptInt64(enc, "rows", c.Rows); err != nil {
		return err
	}
	if len(c.Audits) == 0 {
		return nil
	}
	return events.EncodeAuditOutcomes(enc, "audits", c.Audits)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (c *CompleteIntervals) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		if ok, err := decodeMeta(dec, &c.Meta, k); ok {
			return err
		}
		var err error
		switch string(k) {
		case "model":
			c.Model, err = dec.DecodeString()
		case "version":
			c.Version, err = dec.DecodeString()
		case "ranges":
			c.Ranges, err = msgp.DecodeRanges(dec)
		case "run_kind":
			var s string
			s, err = dec.DecodeString()
			c.RunKind = events.RunKind(s)
		case "run_id":
			c.RunID, err = dec.DecodeString()
		case "work":
			c.Work, err = dec.DecodeString()
		case "rows":
			c.Rows, err = dec.DecodeInt64()
		case "audits":
			c.Audits, err = events.DecodeAuditOutcomes(dec)
		default:
			err = fmt.Errorf("msgpack: unknown field %q", k)
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return Errorf(CodeMalformed, "", "%s: %v", KindCompleteIntervals, err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r Reply) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := msgp.Count(2, r.Code != "", r.Field != "", r.Message != "", r.Seq != 0, r.Duplicate, r.Decision != nil, r.CatchUp != nil,
		r.Plan != nil, len(r.Advances) > 0, len(r.Repairs) > 0, len(r.Envs) > 0, len(r.Plans) > 0, len(r.Retired) > 0, r.Rollback != nil, r.Restatement != nil, len(r.Restatements) > 0, len(r.Registered) > 0)
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	if err := enc.EncodeString("accepted"); err != nil {
		return err
	}
	if err := enc.EncodeBool(r.Accepted); err != nil {
		return err
	}
	for _, f := range [...]struct{ k, v string }{{"code", string(r.Code)}, {"field", r.Field}, {"message", r.Message}} {
		if err := msgp.OptString(enc, f.k, f.v); err != nil {
			return err
		}
	}
	if r.Seq != 0 {
		if err := enc.EncodeString("seq"); err != nil {
			return err
		}
		if err := enc.EncodeUint64(r.Seq); err != nil {
			return err
		}
	}
	if err := enc.EncodeString("events"); err != nil {
		return err
	}
	if err := enc.EncodeInt(int64(r.Events)); err != nil {
		return err
	}
	if r.Duplicate {
		if err := enc.EncodeString("duplicate"); err != nil {
			return err
		}
		if err := enc.EncodeBool(true); err != nil {
			return err
		}
	}
	for _, f := range [...]struct {
		k   string
		set bool
		v   any
	}{
		{"decision", r.Decision != nil, r.Decision}, {"catch_up", r.CatchUp != nil, r.CatchUp}, {"plan", r.Plan != nil, r.Plan},
		{"advances", len(r.Advances) > 0, r.Advances}, {"repairs", len(r.Repairs) > 0, r.Repairs}, {"envs", len(r.Envs) > 0, r.Envs},
		{"plans", len(r.Plans) > 0, r.Plans},
		{"retired", len(r.Retired) > 0, r.Retired},
		{"rollback", r.Rollback != nil, r.Rollback},
		{"restatement", r.Restatement != nil, r.Restatement},
		{"restatements", len(r.Restatements) > 0, r.Restatements},
		{"registered", len(r.Registered) > 0, r.Registered},
	} {
		if !f.set {
			continue
		}
		if err := enc.EncodeString(f.k); err != nil {
			return err
		}
		if err := enc.Encode(f.v); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Reply) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		var err error
		switch string(k) {
		case "accepted":
			r.Accepted, err = dec.DecodeBool()
		case "code":
			var s string
			s, err = dec.DecodeString()
			r.Code = Code(s)
		case "field":
			r.Field, err = dec.DecodeString()
		case "message":
			r.Message, err = dec.DecodeString()
		case "seq":
			r.Seq, err = dec.DecodeUint64()
		case "events":
			r.Events, err = dec.DecodeInt()
		case "duplicate":
			r.Duplicate, err = dec.DecodeBool()
		case "decision":
			err = dec.Decode(&r.Decision)
		case "catch_up":
			err = dec.Decode(&r.CatchUp)
		case "plan":
			err = dec.Decode(&r.Plan)
		case "advances":
			err = dec.Decode(&r.Advances)
		case "repairs":
			err = dec.Decode(&r.Repairs)
		case "envs":
			err = dec.Decode(&r.Envs)
		case "plans":
			err = dec.Decode(&r.Plans)
		case "retired":
			err = dec.Decode(&r.Retired)
		case "rollback":
			err = dec.Decode(&r.Rollback)
		case "restatement":
			err = dec.Decode(&r.Restatement)
		case "restatements":
			err = dec.Decode(&r.Restatements)
		case "registered":
			err = dec.Decode(&r.Registered)
		default:
			err = dec.Skip()
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return Errorf(CodeMalformed, "", "reply: %v", err)
	}
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder: rollback's hand-written
// codec (an operator's command, rare, but one wire form checked like the
// hot path's: fastcodec_test.go and FuzzDecode against the reflective
// oracle).
func (c Rollback) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(metaFields(&c.Meta) + msgp.Count(1, c.ToGeneration != 0)); err != nil {
		return err
	}
	if err := encodeMeta(enc, &c.Meta); err != nil {
		return err
	}
	if err := msgp.String(enc, "env", c.Env); err != nil {
		return err
	}
	if c.ToGeneration == 0 {
		return nil
	}
	if err := enc.EncodeString("to_generation"); err != nil {
		return err
	}
	return enc.EncodeUint64(c.ToGeneration)
}

// DecodeMsgpack implements msgpack.CustomDecoder; unknown keys are
// refused, as Decode's strict pass asks.
func (c *Rollback) DecodeMsgpack(dec *msgpack.Decoder) error {
	err := msgp.Map(dec, func(k []byte) error {
		if ok, err := decodeMeta(dec, &c.Meta, k); ok {
			return err
		}
		var err error
		switch string(k) {
		case "env":
			c.Env, err = dec.DecodeString()
		case "to_generation":
			c.ToGeneration, err = dec.DecodeUint64()
		default:
			err = fmt.Errorf("msgpack: unknown field %q", k)
		}
		return err
	})
	if errors.Is(err, msgp.ErrNotMap) {
		return Errorf(CodeMalformed, "", "%s: %v", KindRollback, err)
	}
	return err
}
