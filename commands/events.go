package commands

import "github.com/tidemark/tidemark/events"

// Events wraps payloads, what the command m heads decided, in events
// caused by it: each at the command's time, carrying its id (Causation),
// actor, correlation and digest (Digest).
func (m *Meta) Events(ids *events.IDSource, digest string, payloads []events.Payload) []events.Event {
	evs := make([]events.Event, len(payloads))
	for i, p := range payloads {
		ev := events.New(ids, m.At, p)
		ev.Causation, ev.Actor, ev.Correlation, ev.Digest = m.ID, m.Actor, m.Correlation, digest
		evs[i] = ev
	}
	return evs
}
