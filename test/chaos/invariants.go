package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"k8s.io/apimachinery/pkg/types"
)

// A Violation is one broken invariant, named by Rule, about the objects
// in Detail.
type Violation struct {
	Rule   string
	Detail string
}

func (v Violation) String() string { return v.Rule + ": " + v.Detail }

// Rules the suite checks.
const (
	RuleDoubleAllocation  = "instance held by two claims"
	RuleRunningUnreserved = "running pod's claim not allocated and reserved for it"
	RuleUnusedAllocation  = "allocated claim without a consumer"
	RuleOrphanClaim       = "claim outliving its pod"
	RulePodLost           = "pod lost"
	RuleStuckPending      = "pod stuck Pending or Running while nothing finishes"
	RuleStuckTerminating  = "pod stuck Terminating"
	RuleUnbalancedDriver  = "claim prepared and never unprepared"
	RuleCDISpecLeft       = "CDI spec left behind"
)

// heldInstance is one allocated instance of a claim.
type heldInstance struct {
	node, driver, id string
	claim            string // namespace/name
}

// CheckNoDoubleAllocation reports instances that two allocated claims
// hold on one node and driver: the same instance, an instance and its
// ancestor, or instances in two partition groups of one instance.
// Instance IDs are paths, instance/group/instance/...: "gpu-1" and
// "gpu-1/halves/half-0" overlap (ancestor), "gpu-1/halves/half-0" and
// "gpu-1/quarters/q-0" overlap (two groups of gpu-1), "gpu-1/halves/half-0"
// and "gpu-1/halves/half-1" do not (siblings in one group).
func CheckNoDoubleAllocation(claims []resourcev1alpha2.ResourceClaim) []Violation {
	byPool := map[string][]heldInstance{}
	for i := range claims {
		c := &claims[i]
		if c.Status.Allocation == nil {
			continue
		}
		for _, h := range c.Status.Allocation.ResourceHandles {
			sd := h.StructuredData
			if sd == nil || sd.Partitionable == nil {
				continue
			}
			for _, in := range sd.Partitionable.Instances {
				pool := sd.NodeName + " " + h.DriverName
				byPool[pool] = append(byPool[pool], heldInstance{node: sd.NodeName, driver: h.DriverName, id: in.ID, claim: c.Namespace + "/" + c.Name})
			}
		}
	}
	var out []Violation
	for _, pool := range sortedKeys(byPool) {
		held := byPool[pool]
		for i := range held {
			for j := i + 1; j < len(held); j++ {
				a, b := held[i], held[j]
				if a.claim != b.claim && overlap(a.id, b.id) {
					out = append(out, Violation{RuleDoubleAllocation, fmt.Sprintf("node %s driver %s: %s holds %s, %s holds %s",
						a.node, a.driver, a.claim, a.id, b.claim, b.id)})
				}
			}
		}
	}
	return out
}

// overlap reports whether two instance IDs cannot be allocated together.
func overlap(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < min(len(as), len(bs)); i++ {
		if as[i] != bs[i] {
			// Segments alternate instance (even) and partition group
			// (odd): two groups of one instance exclude each other, two
			// instances (in one group, or two roots) do not.
			return i%2 == 1
		}
	}
	return true // equal, or one is an ancestor of the other
}

// CheckRunningPodsReserved reports running pods whose claims are not
// allocated and reserved for them, or not all generated. pods and claims
// must be read at one revision.
func CheckRunningPodsReserved(pods []corev1.Pod, claims []resourcev1alpha2.ResourceClaim) []Violation {
	byName := map[string]*resourcev1alpha2.ResourceClaim{}
	for i := range claims {
		byName[claims[i].Namespace+"/"+claims[i].Name] = &claims[i]
	}
	var out []Violation
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		names := p.ResourceClaimNames()
		if len(names) < len(p.Spec.ResourceClaims) {
			out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs with %d of its %d claims recorded", p.Namespace, p.Name, len(names), len(p.Spec.ResourceClaims))})
			continue
		}
		for _, n := range names {
			c := byName[p.Namespace+"/"+n]
			switch {
			case c == nil:
				out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs, its claim %s does not exist", p.Namespace, p.Name, n)})
			case c.Status.Allocation == nil:
				out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs, its claim %s is not allocated", p.Namespace, p.Name, n)})
			case !reservedFor(c, p.UID):
				out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs, its claim %s is not reserved for it", p.Namespace, p.Name, n)})
			}
		}
	}
	return out
}

func reservedFor(c *resourcev1alpha2.ResourceClaim, uid types.UID) bool {
	return slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1alpha2.ResourceClaimConsumerReference) bool { return r.UID == uid })
}

// CheckSettledClaims is for a settled cluster with the pods given: no
// claim is allocated without a consumer, and no claim generated for a pod
// outlives it (nor is a second claim for one pod's entry).
func CheckSettledClaims(pods []corev1.Pod, claims []resourcev1alpha2.ResourceClaim) []Violation {
	live := map[types.UID]bool{}
	for i := range pods {
		live[pods[i].UID] = true
	}
	var out []Violation
	perEntry := map[string][]string{}
	for i := range claims {
		c := &claims[i]
		id := c.Namespace + "/" + c.Name
		if c.Status.Allocation != nil && len(c.Status.ReservedFor) == 0 && c.Spec.AllocationMode != resourcev1alpha2.AllocationModeImmediate {
			out = append(out, Violation{RuleUnusedAllocation, "claim " + id})
		}
		if uid, entry, ok := resourcev1alpha2.GeneratedFor(c); ok {
			if !live[uid] {
				out = append(out, Violation{RuleOrphanClaim, fmt.Sprintf("claim %s of pod %s", id, uid)})
			}
			key := string(uid) + " " + entry
			perEntry[key] = append(perEntry[key], id)
		}
	}
	for _, key := range sortedKeys(perEntry) {
		if ids := perEntry[key]; len(ids) > 1 {
			out = append(out, Violation{RuleOrphanClaim, fmt.Sprintf("%d claims for one entry of one pod (%s): %s", len(ids), key, strings.Join(ids, ", "))})
		}
	}
	return out
}

// CheckNoPodLost reports pods the harness created (names by UID) that it
// did not delete and that are not listed.
func CheckNoPodLost(created map[types.UID]string, deletedByHarness map[types.UID]bool, pods []corev1.Pod) []Violation {
	listed := map[types.UID]bool{}
	for i := range pods {
		listed[pods[i].UID] = true
	}
	uids := make([]string, 0, len(created))
	for uid := range created {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	var out []Violation
	for _, s := range uids {
		uid := types.UID(s)
		if !deletedByHarness[uid] && !listed[uid] {
			out = append(out, Violation{RulePodLost, fmt.Sprintf("pod %s (uid %s) was created and never deleted, but is not listed", created[uid], uid)})
		}
	}
	return out
}

// CheckDriverState reads a driver's --state-file lines ("prepare UID
// NS/NAME", "unprepare UID NS/NAME") and reports claims prepared more often
// than unprepared. A kill between a driver's write of a CDI spec and its
// state line can lose a prepare line, never an unprepare of a claim that
// was prepared: more unprepares than prepares is no leak.
func CheckDriverState(driver, state string) []Violation {
	count := map[string]int{}
	names := map[string]string{}
	for _, l := range strings.Split(state, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "prepare":
			count[f[1]]++
		case "unprepare":
			count[f[1]]--
		default:
			continue
		}
		if len(f) > 2 {
			names[f[1]] = f[2]
		}
	}
	var out []Violation
	for _, uid := range sortedKeys(count) {
		if count[uid] > 0 {
			out = append(out, Violation{RuleUnbalancedDriver, fmt.Sprintf("%s: claim %s (%s) prepared %d more time(s) than unprepared", driver, uid, names[uid], count[uid])})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
