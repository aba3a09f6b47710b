// Package faults injects store failures for tests: a wrapper around an adapter's
// client (the DynamoDB API, the SQLite connection) consults an Injector around every
// write, so the conformance suite can make the next write fail before it is applied,
// or apply it and lose its response.
package faults

import (
	"errors"
	"sync"
)

// Mode is how an injected fault behaves.
type Mode int

// Fault modes.
const (
	// None lets the write through.
	None Mode = iota
	// Before fails the write before it reaches the store: nothing is applied.
	Before
	// After applies the write, then returns an error as if the response was lost.
	After
)

// ErrInjected is the error an injected fault returns (wrapped).
var ErrInjected = errors.New("injected fault: connection reset")

// Injector decides, write by write, whether to inject a fault. The zero value
// injects nothing. It is safe for concurrent use.
type Injector struct {
	mu      sync.Mutex
	plan    []Mode // faults for the next writes, in order
	writes  int
	injects int
}

// Next queues faults for the next writes, in order (None lets one through).
func (in *Injector) Next(modes ...Mode) {
	in.mu.Lock()
	in.plan = append(in.plan, modes...)
	in.mu.Unlock()
}

// Take is called by a client wrapper once per write, before sending it; it returns
// the mode to apply to this write.
func (in *Injector) Take() Mode {
	if in == nil {
		return None
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.writes++
	if len(in.plan) == 0 {
		return None
	}
	m := in.plan[0]
	in.plan = in.plan[1:]
	if m != None {
		in.injects++
	}
	return m
}

// Pending reports how many planned faults have not been used yet.
func (in *Injector) Pending() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.plan)
}

// Counts returns the writes seen and the faults injected so far.
func (in *Injector) Counts() (writes, injected int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.writes, in.injects
}
