package fabricdriver

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
	"allot.dev/allot/pkg/driver/controller"
)

// allocator is the controller side of fabric.example.com: the
// controller.Driver that hands out pool units.
type allocator struct {
	pools  *Pools
	nodes  client.Lister[*corev1.Node]
	dyn    dynamic.Interface
	ledger *ledger
}

var _ controller.Driver = &allocator{}

// GetClassParameters: the driver's classes take no parameters.
func (a *allocator) GetClassParameters(_ context.Context, class *resourcev1alpha2.ResourceClass) (any, error) {
	if ref := class.ParametersRef; ref != nil {
		return nil, fmt.Errorf("class %s: parametersRef %s %s: %s takes no class parameters", class.Name, ref.Kind, ref.Name, DriverName)
	}
	return nil, nil
}

// GetClaimParameters reads the claim's FabricClaimParameters; a claim
// without parametersRef asks for one unit of any model.
func (a *allocator) GetClaimParameters(ctx context.Context, claim *resourcev1alpha2.ResourceClaim, _ *resourcev1alpha2.ResourceClass, _ any) (any, error) {
	return claimParameters(ctx, a.dyn, claim)
}

// Allocate gives the claim free units of one pool: of the claim's model,
// reachable from node (any pool for Immediate claims), the pool with the
// most free units. An optional claim gets a fallback handle when nothing
// fits. A claim that was given units before (and whose allocation did not
// reach the API) gets them again when they suit node; otherwise they are
// released first.
func (a *allocator) Allocate(_ context.Context, claim *resourcev1alpha2.ResourceClaim, claimParams any,
	_ *resourcev1alpha2.ResourceClass, _ any, node string) (*resourcev1alpha2.AllocationResult, error) {
	p, ok := claimParams.(*ClaimParameters)
	if !ok {
		return nil, fmt.Errorf("claim parameters of type %T, want *ClaimParameters", claimParams)
	}
	labels, err := a.nodeLabels(node)
	if err != nil {
		return nil, err
	}
	l := a.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.pending[claim.UID]; ok {
		if pool, ok := a.pools.Get(h.Pool); ok && (node == "" || pool.Reachable(labels)) &&
			len(h.Units) == p.Count && (p.Model == "" || p.Model == pool.Model) {
			return result(h, pool), nil
		}
		delete(l.pending, claim.UID)
	}
	u := l.usageLocked(nil)
	pool, ok := a.choose(p, labels, node != "", u)
	if !ok {
		if p.Optional {
			return result(Handle{Fallback: true}, Pool{}), nil
		}
		return nil, noPoolError(p, node)
	}
	h := Handle{Pool: pool.Name, Model: pool.Model, Units: u.free(pool)[:p.Count]}
	l.pending[claim.UID] = h
	return result(h, pool), nil
}

func noPoolError(p *ClaimParameters, node string) error {
	model := "any model"
	if p.Model != "" {
		model = "model " + p.Model
	}
	where := ""
	if node != "" {
		where = " reachable from node " + node
	}
	return fmt.Errorf("no pool%s has %d free units of %s", where, p.Count, model)
}

// choose picks the pool for p: of p's model, reachable from a node with
// labels when reach is set, with at least p.Count free units, the one
// with the most (the first in the configuration on a tie).
func (a *allocator) choose(p *ClaimParameters, labels map[string]string, reach bool, u usage) (Pool, bool) {
	free := map[string]int{}
	for _, pool := range a.pools.Pools {
		free[pool.Name] = len(u.free(pool))
	}
	return pickPool(a.pools.Pools, p, labels, reach, free)
}

// pickPool is choose over free unit counts per pool.
func pickPool(pools []Pool, p *ClaimParameters, labels map[string]string, reach bool, free map[string]int) (Pool, bool) {
	var best Pool
	found := false
	for _, pool := range pools {
		if (p.Model != "" && pool.Model != p.Model) || (reach && !pool.Reachable(labels)) || free[pool.Name] < p.Count {
			continue
		}
		if !found || free[pool.Name] > free[best.Name] {
			best, found = pool, true
		}
	}
	return best, found
}

func result(h Handle, pool Pool) *resourcev1alpha2.AllocationResult {
	r := &resourcev1alpha2.AllocationResult{ResourceHandles: []resourcev1alpha2.ResourceHandle{{DriverName: DriverName, Data: h.Encode()}}}
	if !h.Fallback {
		r.AvailableOnNodes = pool.AvailableOnNodes()
	}
	return r
}

// nodeLabels returns the labels of a node ("": none needed).
func (a *allocator) nodeLabels(node string) (map[string]string, error) {
	if node == "" {
		return nil, nil
	}
	n, err := a.nodes.Get("", node)
	if err != nil {
		return nil, fmt.Errorf("selected node %s: %w", node, err)
	}
	return n.Labels, nil
}

// Deallocate forgets the units Allocate gave the claim; units recorded in
// the API are free once the controller clears the allocation.
func (a *allocator) Deallocate(_ context.Context, claim *resourcev1alpha2.ResourceClaim) error {
	a.ledger.forget(claim.UID)
	return nil
}

// UnsuitableNodes finds, for each potential node, whether all the pod's
// required claims fit together in the pools the node reaches (greedily,
// largest request first, each in the reachable pool with the most free
// units). Where they do not, the node is unsuitable for every claim.
// Optional claims are placed after the required ones: they are
// unsuitable where they would get nothing, unless they would get nothing
// on every node, in which case they fall back everywhere (seed 003,
// "implementing optional resources").
func (a *allocator) UnsuitableNodes(_ context.Context, _ *corev1.Pod, claims []*controller.ClaimAllocation, potentialNodes []string) error {
	var required, optional []*controller.ClaimAllocation
	exclude := map[types.UID]bool{}
	for _, ca := range claims {
		p, ok := ca.ClaimParameters.(*ClaimParameters)
		if !ok {
			return fmt.Errorf("claim %s: parameters of type %T, want *ClaimParameters", ca.Claim.Name, ca.ClaimParameters)
		}
		exclude[ca.Claim.UID] = true // what Allocate gave them before is theirs to reuse
		if p.Optional {
			optional = append(optional, ca)
		} else {
			required = append(required, ca)
		}
		ca.UnsuitableNodes = nil
	}
	byCount := func(x, y *controller.ClaimAllocation) int {
		return cmp.Compare(y.ClaimParameters.(*ClaimParameters).Count, x.ClaimParameters.(*ClaimParameters).Count)
	}
	slices.SortStableFunc(required, byCount)
	slices.SortStableFunc(optional, byCount)
	a.ledger.mu.Lock()
	u := a.ledger.usageLocked(exclude)
	a.ledger.mu.Unlock()
	free := map[string]int{}
	for _, pool := range a.pools.Pools {
		free[pool.Name] = len(u.free(pool))
	}
	var optionalFits []string // nodes where the optional claims get units
	for _, node := range potentialNodes {
		labels, err := a.nodeLabels(node)
		left := maps.Clone(free)
		if err != nil || !a.place(required, labels, left) {
			for _, ca := range claims {
				ca.UnsuitableNodes = append(ca.UnsuitableNodes, node)
			}
			continue
		}
		if a.place(optional, labels, left) {
			optionalFits = append(optionalFits, node)
		}
	}
	if len(optionalFits) > 0 {
		for _, node := range potentialNodes {
			for _, ca := range optional {
				if !slices.Contains(optionalFits, node) && !slices.Contains(ca.UnsuitableNodes, node) {
					ca.UnsuitableNodes = append(ca.UnsuitableNodes, node)
				}
			}
		}
	}
	return nil
}

// place takes units from free for each claim in turn; false when one does
// not fit.
func (a *allocator) place(claims []*controller.ClaimAllocation, labels map[string]string, free map[string]int) bool {
	for _, ca := range claims {
		p := ca.ClaimParameters.(*ClaimParameters)
		pool, ok := pickPool(a.pools.Pools, p, labels, true, free)
		if !ok {
			return false
		}
		free[pool.Name] -= p.Count
	}
	return true
}
