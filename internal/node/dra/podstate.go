package dra

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/node/pods"
)

// podState is what the Manager remembers of a pod between calls: what it
// waits for and its back-off. It exists from the first Admit that holds
// the pod until the pod is admitted or released.
type podState struct {
	// waitClaims (NAMESPACE/NAME) and waitDrivers wake the pod's worker
	// when they change.
	waitClaims  map[string]bool
	waitDrivers map[string]bool

	// Prepare back-off: after failures consecutive failures the next
	// attempt is at retryAt; until then Admit answers hold again.
	failures int
	retryAt  time.Time
	hold     pods.Admission
	// reread names claims (NAMESPACE/NAME) to read from the API server,
	// not the cache, at the next attempt (a driver answered NOT_FOUND).
	reread map[string]bool
	wake   *time.Timer

	// Unprepare back-off.
	relFailures int
	relRetryAt  time.Time
	relErr      *UnprepareError
}

// podStates owns every podState; all fields are guarded by mu.
type podStates struct {
	mu     sync.Mutex
	states map[types.UID]*podState
}

func newPodStates() *podStates { return &podStates{states: map[types.UID]*podState{}} }

// with runs f on uid's state, creating it.
func (p *podStates) with(uid types.UID, f func(*podState)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.states[uid]
	if st == nil {
		st = &podState{}
		p.states[uid] = st
	}
	f(st)
}

// forget drops uid's state.
func (p *podStates) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.states[uid]; st != nil && st.wake != nil {
		st.wake.Stop()
	}
	delete(p.states, uid)
}

// waitingForClaim returns the pods that wait for the claim NAMESPACE/NAME.
func (p *podStates) waitingForClaim(key string) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for uid, st := range p.states {
		if st.waitClaims[key] {
			out = append(out, uid)
		}
	}
	return out
}

// driverRegistered returns the pods waiting for driver; their unprepare
// back-off ends now, since what failed was the driver's absence.
func (p *podStates) driverRegistered(driver string) []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for uid, st := range p.states {
		if st.waitDrivers[driver] {
			st.relRetryAt = time.Time{}
			out = append(out, uid)
		}
	}
	return out
}

// stopTimers stops every wake-up timer (the Manager stops).
func (p *podStates) stopTimers() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.states {
		if st.wake != nil {
			st.wake.Stop()
		}
	}
}

func setOf(keys []string) map[string]bool {
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}
