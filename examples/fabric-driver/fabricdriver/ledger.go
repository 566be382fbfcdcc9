package fabricdriver

import (
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// ledger knows which units are taken. It keeps no store of its own: the
// taken units are those named by the handles of the claims allocated in
// the API (seen through the controller's claims informer), plus the
// handles Allocate gave out that may not have reached the API yet
// (pending, keyed by claim UID, forgotten on Deallocate or when the claim
// is deleted). After a restart pending is empty, so a unit reserved by a
// controller that died before the status write is free again; the claim
// then gets allocated anew, once.
//
// Counting a unit twice (pending and in the API) is harmless: it is the
// same claim UID, counted once. Between Deallocate and the status write
// that clears the allocation the unit is still counted, which errs on the
// safe side.
type ledger struct {
	claims client.Lister[*resourcev1alpha2.ResourceClaim]
	log    *slog.Logger

	// mu is held by Allocate from reading the usage to recording its
	// choice, so concurrent claims never get the same unit.
	mu      sync.Mutex
	pending map[types.UID]Handle
}

func newLedger(claims client.Lister[*resourcev1alpha2.ResourceClaim], log *slog.Logger) *ledger {
	return &ledger{claims: claims, log: log, pending: map[types.UID]Handle{}}
}

// usage is the taken units per pool.
type usage map[string]map[string]bool

func (u usage) take(pool string, units ...string) {
	if u[pool] == nil {
		u[pool] = map[string]bool{}
	}
	for _, id := range units {
		u[pool][id] = true
	}
}

// free returns the pool's free units, lowest index first.
func (u usage) free(p Pool) []string {
	var out []string
	for i := range p.Capacity {
		if id := p.UnitID(i); !u[p.Name][id] {
			out = append(out, id)
		}
	}
	return out
}

// usageLocked computes the taken units, leaving out the claims in
// exclude. Call with mu held.
func (l *ledger) usageLocked(exclude map[types.UID]bool) usage {
	u := usage{}
	claims, err := l.claims.List(nil)
	if err != nil {
		l.log.Error("list claims from the cache", "err", err) // an informer's cache does not fail
	}
	seen := map[types.UID]bool{}
	for _, c := range claims {
		if exclude[c.UID] {
			continue
		}
		h, ok := l.allocated(c)
		if !ok {
			continue
		}
		seen[c.UID] = true
		u.take(h.Pool, h.Units...)
	}
	for uid, h := range l.pending {
		if !seen[uid] && !exclude[uid] {
			u.take(h.Pool, h.Units...)
		}
	}
	return u
}

// allocated returns the handle of a claim allocated by this driver.
func (l *ledger) allocated(c *resourcev1alpha2.ResourceClaim) (Handle, bool) {
	a := c.Status.Allocation
	if a == nil || c.Status.DriverName != DriverName {
		return Handle{}, false
	}
	for _, rh := range a.ResourceHandles {
		if rh.DriverName != DriverName {
			continue
		}
		h, err := DecodeHandle(rh.Data)
		if err != nil {
			l.log.Warn("allocated claim with an unreadable handle; its units are not counted",
				"claim", c.Namespace+"/"+c.Name, "err", err)
			return Handle{}, false
		}
		return h, !h.Fallback
	}
	return Handle{}, false
}

// forget drops what Allocate gave a claim that was deleted.
func (l *ledger) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, uid)
}
