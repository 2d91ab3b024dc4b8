package transport

import (
	"sync"
	"testing"
	"time"
)

// The pool runs at most n jobs at once, blocks the next until one ends,
// and reuses its goroutines: many jobs in turn start one goroutine.
func TestPool(t *testing.T) {
	p := newPool(2)
	defer p.stop()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		p.run(wg.Done)
		wg.Wait()
	}
	if n := p.started.Load(); n > 2 {
		t.Fatalf("100 jobs in turn started %d goroutines, want at most 2", n)
	}
	release := make(chan struct{})
	running := make(chan struct{}, 3)
	for i := 0; i < 2; i++ {
		p.run(func() { running <- struct{}{}; <-release })
	}
	<-running
	<-running
	third := make(chan struct{})
	go func() { p.run(func() { running <- struct{}{} }); close(third) }()
	select {
	case <-running:
		t.Fatal("a third job ran while two were busy")
	case <-time.After(50 * time.Millisecond): // absence can only be sampled
	}
	close(release)
	deadline := time.After(10 * time.Second)
	select {
	case <-running:
	case <-deadline:
		t.Fatal("the third job never ran")
	}
	<-third
	if n := p.started.Load(); n > 2 {
		t.Fatalf("started %d goroutines, want at most 2", n)
	}
}
