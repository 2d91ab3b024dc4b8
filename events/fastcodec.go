package events

import (
	"errors"
	"fmt"

	"github.com/tidemark/tidemark/internal/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs for the envelope and IntervalsCompleted, the
// events of the command hot path, and their only codecs: they write the
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
