package framework

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNotFound is returned by CycleState.Read for a key nobody wrote.
var ErrNotFound = errors.New("not found in cycle state")

// StateKey names one plugin's data in a CycleState; by convention the
// plugin's name plus a suffix.
type StateKey string

// StateData is one plugin's per-cycle data. Clone must return a copy that
// shares nothing mutable with the original.
type StateData interface {
	Clone() StateData
}

// CycleState is the scratch space of one scheduling attempt of one pod:
// PreFilter writes, Filter and Score read (concurrently), Reserve and the
// binding step read and may write. It lives from Pop to the end of
// binding and is then dropped. It is safe for concurrent use; reads take
// no lock, since Filter reads it once per node and plugin: the few
// entries are a slice, replaced on every write.
type CycleState struct {
	data       atomic.Pointer[[]stateEntry] // replaced, never modified; writes hold mu
	mu         sync.Mutex
	skipFilter map[string]bool
}

type stateEntry struct {
	key StateKey
	v   StateData
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{skipFilter: map[string]bool{}}
}

// Read returns the data stored under key, or ErrNotFound.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	if p := c.data.Load(); p != nil {
		for _, e := range *p {
			if e.key == key {
				return e.v, nil
			}
		}
	}
	return nil, fmt.Errorf("read %s: %w", key, ErrNotFound)
}

// Write stores data under key, replacing what was there.
func (c *CycleState) Write(key StateKey, v StateData) {
	c.update(func(es []stateEntry) []stateEntry {
		if i := slices.IndexFunc(es, func(e stateEntry) bool { return e.key == key }); i >= 0 {
			es[i].v = v
			return es
		}
		return append(es, stateEntry{key: key, v: v})
	})
}

// Delete removes key.
func (c *CycleState) Delete(key StateKey) {
	c.update(func(es []stateEntry) []stateEntry {
		return slices.DeleteFunc(es, func(e stateEntry) bool { return e.key == key })
	})
}

// update replaces the entries with fn's change of a copy of them.
func (c *CycleState) update(fn func([]stateEntry) []stateEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur []stateEntry
	if p := c.data.Load(); p != nil {
		cur = *p
	}
	next := fn(slices.Clone(cur))
	c.data.Store(&next)
}

// Clone copies the state, cloning every value, so that a what-if run
// (Diagnose over several nodes, a simulation) cannot disturb the original.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	out := NewCycleState()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.data.Load(); p != nil {
		cloned := make([]stateEntry, len(*p))
		for i, e := range *p {
			cloned[i] = stateEntry{key: e.key, v: e.v.Clone()}
		}
		out.data.Store(&cloned)
	}
	for k := range c.skipFilter {
		out.skipFilter[k] = true
	}
	return out
}

// ReadAs reads key and asserts its type.
func ReadAs[T StateData](c *CycleState, key StateKey) (T, error) {
	var zero T
	v, err := c.Read(key)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("read %s: holds a %T, want %T", key, v, zero)
	}
	return t, nil
}

func (c *CycleState) setSkipFilter(plugin string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skipFilter[plugin] = true
}

func (c *CycleState) skipsFilter(plugin string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skipFilter[plugin]
}
