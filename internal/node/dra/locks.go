package dra

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// keyedMutex serialises work per claim UID: the prepare of a pod and the
// release of another that share a claim never interleave. Locks of
// several claims are taken in sorted order, so two callers cannot
// deadlock. The zero value is ready.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[types.UID]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

// lock locks every key and returns the function that unlocks them.
func (k *keyedMutex) lock(keys []types.UID) (unlock func()) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	held := make([]*refMutex, 0, len(keys))
	for _, key := range keys {
		k.mu.Lock()
		if k.locks == nil {
			k.locks = map[types.UID]*refMutex{}
		}
		l := k.locks[key]
		if l == nil {
			l = &refMutex{}
			k.locks[key] = l
		}
		l.refs++
		k.mu.Unlock()
		l.Lock()
		held = append(held, l)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
			k.mu.Lock()
			held[i].refs--
			if held[i].refs == 0 {
				delete(k.locks, keys[i])
			}
			k.mu.Unlock()
		}
	}
}
