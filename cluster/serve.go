package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/tidemark/tidemark/transport"
)

// DefaultWritesGrace is how long a member that lost the writer lease goes
// on serving the commands that write (forwarding them to the next
// writer), unless Config.WritesGrace says otherwise.
const DefaultWritesGrace = 2 * time.Second

// Service is a member's command service: the queries on every member, the
// commands that write on the writer only.
type Service struct {
	queries *transport.Service
	done    chan struct{}
	once    sync.Once
	err     error // Stop's
	wg      sync.WaitGroup
	mu      sync.Mutex
	writes  *transport.Service // while this member is the writer
}

// Serve serves the command service on nc with m as its handler: the
// queries (transport.Queries) at once, and the commands that write
// (transport.Writes) for as long as m is the writer, so that a client's
// command that writes reaches the writer directly, never through another
// member (a forward costs every command two more hops and a wait for the
// forwarding member's projection). While no member is the writer, such a
// command finds no responder; transport.Client asks again until one
// serves (Client.NoServiceWait). A command still reaching a member that
// has just lost the writer lease is forwarded (Handle). cfg.Kinds is set
// by Serve.
func (m *Member) Serve(nc *nats.Conn, cfg transport.ServiceConfig) (*Service, error) {
	if cfg.Limiter == nil {
		cfg.Limiter = transport.NewLimiter(cfg.RateLimit, cfg.RateBurst)
	}
	qcfg := cfg
	qcfg.Kinds = transport.Queries()
	queries, err := transport.Serve(nc, m, qcfg)
	if err != nil {
		return nil, err
	}
	s := &Service{queries: queries, done: make(chan struct{})}
	wcfg := cfg
	wcfg.Kinds = transport.Writes()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			on, changed := m.Writing()
			s.mu.Lock()
			ws := s.writes
			s.mu.Unlock()
			switch {
			case on && ws == nil:
				ws, err := transport.Serve(nc, m, wcfg)
				if err != nil {
					m.log.Warn("serving the commands that write", "err", err)
					select {
					case <-s.done:
						return
					case <-time.After(100 * time.Millisecond):
					}
					continue
				}
				s.mu.Lock()
				s.writes = ws
				s.mu.Unlock()
			case !on && ws != nil:
				s.mu.Lock()
				s.writes = nil
				s.mu.Unlock()
				// It goes on serving for the grace, forwarding to the
				// next writer (Handle): until the next writer's
				// subscription has reached every server, a server may
				// still route a write here, and one with no subscriber
				// here would be dropped unanswered. Neither the grace nor
				// the drain holds up serving again.
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					select {
					case <-s.done:
					case <-time.After(m.writesGrace):
					}
					_ = ws.Stop()
				}()
			}
			select {
			case <-s.done:
				return
			case <-changed:
			}
		}
	}()
	return s, nil
}

// Info is the micro info of the services running now: the queries', and
// the writes' while this member is the writer.
func (s *Service) Info() []micro.Info {
	out := []micro.Info{s.queries.Info()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writes != nil {
		out = append(out, s.writes.Info())
	}
	return out
}

// Stop stops both services, draining the commands in flight. Later calls
// wait for the first and return its result.
func (s *Service) Stop() error {
	s.once.Do(func() { s.err = s.stop() })
	return s.err
}

func (s *Service) stop() error {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	ws := s.writes
	s.writes = nil
	s.mu.Unlock()
	var errs []error
	if ws != nil {
		errs = append(errs, ws.Stop())
	}
	errs = append(errs, s.queries.Stop())
	return errors.Join(errs...)
}
