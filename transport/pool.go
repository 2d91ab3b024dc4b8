package transport

import (
	"sync"
	"sync/atomic"
)

// pool runs jobs on at most n goroutines that live on between jobs. A
// goroutine per command starts with a small stack and grows it, copying,
// on every command: the profile of the command path put that at 7 % of
// its CPU (docs/performance.md).
type pool struct {
	jobs    chan func()
	slots   chan struct{} // one per goroutine running
	quit    chan struct{}
	once    sync.Once
	started atomic.Int64 // goroutines started (for tests)
}

func newPool(n int) *pool {
	return &pool{jobs: make(chan func()), slots: make(chan struct{}, n), quit: make(chan struct{})}
}

// run hands job to an idle goroutine, or starts one while fewer than n
// run; it blocks while n are busy (back-pressure).
func (p *pool) run(job func()) {
	select {
	case p.jobs <- job:
	case p.slots <- struct{}{}:
		p.started.Add(1)
		go p.work(job)
	}
}

func (p *pool) work(job func()) {
	defer func() { <-p.slots }()
	for {
		job()
		select {
		case job = <-p.jobs:
		case <-p.quit:
			return
		}
	}
}

// stop ends the idle goroutines. Call it once no run is in progress.
func (p *pool) stop() { p.once.Do(func() { close(p.quit) }) }
