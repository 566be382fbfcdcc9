// Package keylock serializes work per key (a claim UID) for the driver
// SDKs: a lock per key, taken with a context, dropped when idle.
package keylock

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Locks holds one lock per key in use. The zero value is ready.
type Locks struct {
	mu    sync.Mutex
	locks map[types.UID]*lock
}

type lock struct {
	held  chan struct{} // holds a value while the lock is taken
	users int
}

// Lock takes uid's lock and returns its release, or ctx's error when ctx
// ends first. A key's lock is dropped once nobody holds or waits for it.
func (l *Locks) Lock(ctx context.Context, uid types.UID) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[types.UID]*lock{}
	}
	k := l.locks[uid]
	if k == nil {
		k = &lock{held: make(chan struct{}, 1)}
		l.locks[uid] = k
	}
	k.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		k.users--
		if k.users == 0 {
			delete(l.locks, uid)
		}
		l.mu.Unlock()
	}
	select {
	case k.held <- struct{}{}:
		return func() { <-k.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// size is how many keys have a lock (for tests).
func (l *Locks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
