package controller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// claimLocks serializes the work on one claim: a claim is handled both on
// its own (Immediate allocation, deallocation) and through the scheduling
// contexts of its pods, by different workers.
type claimLocks struct {
	mu    sync.Mutex
	locks map[types.UID]*claimLock
}

type claimLock struct {
	held  chan struct{} // holds a value while the lock is taken
	users int
}

// lock takes uid's lock and returns its release, or ctx's error when ctx
// ends first. Idle locks are dropped.
func (l *claimLocks) lock(ctx context.Context, uid types.UID) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[types.UID]*claimLock{}
	}
	cl := l.locks[uid]
	if cl == nil {
		cl = &claimLock{held: make(chan struct{}, 1)}
		l.locks[uid] = cl
	}
	cl.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		cl.users--
		if cl.users == 0 {
			delete(l.locks, uid)
		}
		l.mu.Unlock()
	}
	select {
	case cl.held <- struct{}{}:
		return func() { <-cl.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("wait for other work on claim %s: %w", uid, ctx.Err())
	}
}
