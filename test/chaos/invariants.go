package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/api/resource/resourceconv"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/fence"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	RuleFinalizerLeft     = "deallocated claim keeping the delete-protection finalizer"
	RulePodLost           = "pod lost"
	RuleStuckPending      = "pod stuck Pending or Running while nothing finishes"
	RuleStuckTerminating  = "pod stuck Terminating"
	RuleUnbalancedDriver  = "claim prepared and never unprepared"
	RuleNeverPrepared     = "claims of a kind never prepared by a driver"
	RuleCDISpecLeft       = "CDI spec left behind"
	RulePreparedTwice     = "device prepared for two claims at once"
)

// Claims are a namespace's claims as stored: the v1alpha2 claims and the
// resource.k8s.io/v1 claims, each listed through its own version. Both
// versions are one set of objects, and a List through one version also
// returns views of the other version's claims; views are left out here
// (StoredClaims drops them when listing, the checks skip any left).
type Claims struct {
	V1alpha2 []resourcev1alpha2.ResourceClaim
	V1       []resourcev1.ResourceClaim
}

// Len is the number of stored claims of both versions.
func (cs Claims) Len() int { return len(cs.stored()) }

// claimVersion names a claim's stored version in details: v1alpha2 claims
// read as they did before v1 ("claim"), v1 ones are marked.
const (
	versionV1alpha2 = "claim"
	versionV1       = "v1 claim"
)

// kindUpstream is the kind of a v1 claim allocated a device of the upstream
// driver (test/upstreamdriver); the other claims' kind is their version.
const kindUpstream = "upstream v1 claim"

// claim is one stored claim of either version, as the checks see it.
type claim struct {
	id        string // namespace/name
	uid       types.UID
	version   string // versionV1alpha2 or versionV1
	meta      *metav1.ObjectMeta
	allocated bool
	immediate bool // v1alpha2 AllocationModeImmediate: stays allocated without consumers
	devices   []heldDevice
	reserved  []types.UID
	// multiNode: the allocation holds devices other nodes can reach (its
	// nodes are not one node by name): the fence may stop its pods.
	multiNode bool
}

// heldDevice is one allocated device of a claim, named as a v1 device:
// driver, pool (a seed slice's node name) and device (a seed instance ID
// with "/" written "--").
type heldDevice struct {
	driver, pool, device string
	claim                string // namespace/name, with the version's mark: one claim's devices do not exclude each other
}

// kind is the claim's version, or kindUpstream for a claim holding a
// device of the upstream driver.
func (c *claim) kind() string {
	if slices.ContainsFunc(c.devices, func(d heldDevice) bool { return d.driver == upstreamDriver }) {
		return kindUpstream
	}
	return c.version
}

func (c *claim) label() string {
	if c.version == versionV1 {
		return c.id + " (v1)"
	}
	return c.id
}

// stored is every claim that is not a view, in one form.
func (cs Claims) stored() []*claim {
	var out []*claim
	for i := range cs.V1alpha2 {
		c := &cs.V1alpha2[i]
		if resourcev1alpha2.IsView(c) {
			continue
		}
		n := &claim{id: c.Namespace + "/" + c.Name, uid: c.UID, version: versionV1alpha2, meta: &c.ObjectMeta,
			allocated: c.Status.Allocation != nil, immediate: c.Spec.AllocationMode == resourcev1alpha2.AllocationModeImmediate,
			multiNode: fence.AllocationReachesOtherNodes(c.Status.Allocation)}
		for _, r := range c.Status.ReservedFor {
			n.reserved = append(n.reserved, r.UID)
		}
		if c.Status.Allocation != nil {
			for _, h := range c.Status.Allocation.ResourceHandles {
				sd := h.StructuredData
				if sd == nil || sd.Partitionable == nil {
					continue
				}
				for _, in := range sd.Partitionable.Instances {
					n.devices = append(n.devices, heldDevice{driver: h.DriverName, pool: sd.NodeName, device: resourceconv.SeedDeviceName(in.ID)})
				}
			}
		}
		out = append(out, n)
	}
	for i := range cs.V1 {
		c := &cs.V1[i]
		if resourcev1alpha2.IsView(c) {
			continue
		}
		n := &claim{id: c.Namespace + "/" + c.Name, uid: c.UID, version: versionV1, meta: &c.ObjectMeta, allocated: c.Status.Allocation != nil,
			multiNode: fence.AllocationV1ReachesOtherNodes(c.Status.Allocation)}
		for _, r := range c.Status.ReservedFor {
			n.reserved = append(n.reserved, r.UID)
		}
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				n.devices = append(n.devices, heldDevice{driver: r.Driver, pool: r.Pool, device: r.Device})
			}
		}
		out = append(out, n)
	}
	for _, c := range out {
		for i := range c.devices {
			c.devices[i].claim = c.label()
		}
	}
	return out
}

// StoredClaims drops the views from claims listed through both versions.
func StoredClaims(v1alpha2 []resourcev1alpha2.ResourceClaim, v1 []resourcev1.ResourceClaim) Claims {
	var out Claims
	for i := range v1alpha2 {
		if !resourcev1alpha2.IsView(&v1alpha2[i]) {
			out.V1alpha2 = append(out.V1alpha2, v1alpha2[i])
		}
	}
	for i := range v1 {
		if !resourcev1alpha2.IsView(&v1[i]) {
			out.V1 = append(out.V1, v1[i])
		}
	}
	return out
}

// CheckNoDoubleAllocation reports devices that two allocated claims, of
// either version, hold at once. Both versions' allocations are compared
// as v1 devices, driver/pool/device: a v1 result as it is, a v1alpha2
// structured handle's instance as driver/nodeName/SeedDeviceName(ID). Two
// devices of one driver and pool overlap when their seed instances do:
// the same instance, an instance and its ancestor, or instances in two
// partition groups of one instance. Instance IDs are paths,
// instance/group/instance/... (a v1 device a--b--c is instance a/b/c):
// "gpu-1" and "gpu-1/halves/half-0" overlap (ancestor),
// "gpu-1/halves/half-0" and "gpu-1/quarters/q-0" overlap (two groups of
// gpu-1), "gpu-1/halves/half-0" and "gpu-1/halves/half-1" do not
// (siblings in one group). Devices of other drivers (upstream.example.com's
// gpu-0, gpu-1, ... in the pool named after its node) have no "--": two
// claims overlap on one only when they hold the same device.
func CheckNoDoubleAllocation(claims Claims) []Violation {
	byPool := map[string][]heldDevice{}
	for _, c := range claims.stored() {
		for _, d := range c.devices {
			key := d.driver + "/" + d.pool
			byPool[key] = append(byPool[key], d)
		}
	}
	var out []Violation
	for _, pool := range sortedKeys(byPool) {
		held := byPool[pool]
		for i := range held {
			for j := i + 1; j < len(held); j++ {
				a, b := held[i], held[j]
				if a.claim == b.claim {
					continue
				}
				if ai, bi := resourceconv.SeedInstanceID(a.device), resourceconv.SeedInstanceID(b.device); overlap(ai, bi) {
					out = append(out, Violation{RuleDoubleAllocation, fmt.Sprintf("node %s driver %s: %s holds %s, %s holds %s",
						a.pool, a.driver, a.claim, ai, b.claim, bi)})
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

// CheckRunningPodsReserved reports running pods whose claims, of either
// version, are not allocated and reserved for them, or not all generated.
// pods and claims must be read at one revision.
func CheckRunningPodsReserved(pods []corev1.Pod, claims Claims) []Violation {
	byName := map[string]*claim{}
	for _, c := range claims.stored() {
		byName[c.id] = c
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
			case !c.allocated:
				out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs, its %s %s is not allocated", p.Namespace, p.Name, c.version, n)})
			case !slices.Contains(c.reserved, p.UID):
				out = append(out, Violation{RuleRunningUnreserved, fmt.Sprintf("pod %s/%s runs, its %s %s is not reserved for it", p.Namespace, p.Name, c.version, n)})
			}
		}
	}
	return out
}

// CheckSettledClaims is for a settled cluster with the pods given: no
// claim of either version is allocated without a consumer or keeps the
// delete-protection finalizer once deallocated, and no claim generated
// for a pod outlives it (nor is a second claim for one pod's entry).
func CheckSettledClaims(pods []corev1.Pod, claims Claims) []Violation {
	live := map[types.UID]bool{}
	for i := range pods {
		live[pods[i].UID] = true
	}
	var out []Violation
	perEntry := map[string][]string{}
	for _, c := range claims.stored() {
		if c.allocated && len(c.reserved) == 0 && !c.immediate {
			out = append(out, Violation{RuleUnusedAllocation, c.version + " " + c.id})
		}
		if !c.allocated && len(c.reserved) == 0 && slices.Contains(c.meta.Finalizers, resourcev1alpha2.DeleteProtectionFinalizer) {
			out = append(out, Violation{RuleFinalizerLeft, c.version + " " + c.id})
		}
		if uid, entry, ok := resourcev1alpha2.GeneratedFor(&resourcev1alpha2.ResourceClaim{ObjectMeta: *c.meta}); ok {
			if !live[uid] {
				out = append(out, Violation{RuleOrphanClaim, fmt.Sprintf("%s %s of pod %s", c.version, c.id, uid)})
			}
			key := string(uid) + " " + entry
			perEntry[key] = append(perEntry[key], c.label())
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
// than unprepared. Claims of both versions go through the driver by their
// own UIDs (a v1 claim as its v1alpha2 form, with the v1 claim's UID);
// versions names the version of the UIDs the run saw (versionV1 marks a
// v1 claim in the detail). A kill between a driver's write of a CDI spec
// and its state line can lose a prepare line, never an unprepare of a
// claim that was prepared: more unprepares than prepares is no leak.
func CheckDriverState(driver, state string, versions map[types.UID]string) []Violation {
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
			noun := versions[types.UID(uid)]
			if noun == "" {
				noun = versionV1alpha2
			}
			out = append(out, Violation{RuleUnbalancedDriver, fmt.Sprintf("%s: %s %s (%s) prepared %d more time(s) than unprepared", driver, noun, uid, names[uid], count[uid])})
		}
	}
	return out
}

// CheckDriverStateLast is CheckDriverState for a driver that appends a
// line per call, test/upstreamdriver ("prepare UID", "unprepare UID"): a
// claim prepared again (the node agent retrying after a kill) has two
// prepare lines, one unprepared twice two unprepare lines, so counts mean
// nothing. A claim is left prepared when its last line is a prepare. A
// kill between the driver's CDI spec and its state line can lose a
// prepare line (the CDI check sees a spec left behind), and between the
// spec's removal and the unprepare line an unprepare line (the agent
// retries, and the driver writes the line again).
func CheckDriverStateLast(driver, state string, versions map[types.UID]string) []Violation {
	last, prepares := map[string]string{}, map[string]int{}
	for _, l := range strings.Split(state, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "prepare" && f[0] != "unprepare" {
			continue
		}
		last[f[1]] = f[0]
		if f[0] == "prepare" {
			prepares[f[1]]++
		}
	}
	var out []Violation
	for _, uid := range sortedKeys(last) {
		if last[uid] == "prepare" {
			noun := versions[types.UID(uid)]
			if noun == "" {
				noun = versionV1
			}
			out = append(out, Violation{RuleUnbalancedDriver, fmt.Sprintf("%s: %s %s not unprepared after its last prepare (%d prepare lines)", driver, noun, uid, prepares[uid])})
		}
	}
	return out
}

// CheckNoDevicePreparedTwice replays a driver's --state-file in order and
// reports a prepare of a device (or of one that overlaps it: a partition
// and its GPU) that another claim still holds by the driver's own record.
// A prepare line gives a claim its devices, "prepare UID NS/NAME ID,ID..."
// for the example driver (named), "prepare UID DEV,DEV..." for
// test/upstreamdriver; "unprepare UID ..." takes them back. A claim
// prepared again keeps its devices; a line without devices gives none.
// The example driver writes the unprepare line before it removes the
// claim's CDI spec, so the record never shows a hold longer than the real
// one.
func CheckNoDevicePreparedTwice(driver, state string, named bool) []Violation {
	devField := 2
	if named {
		devField = 3
	}
	held := map[string][]string{} // claim UID -> devices
	var out []Violation
	for i, l := range strings.Split(state, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		uid := f[1]
		if f[0] == "unprepare" {
			delete(held, uid)
		}
		if f[0] != "prepare" || len(f) <= devField {
			continue
		}
		mine := strings.Split(f[devField], ",")
		for _, other := range sortedKeys(held) {
			if other == uid {
				continue
			}
			for _, a := range mine {
				for _, b := range held[other] {
					if overlap(a, b) {
						out = append(out, Violation{RulePreparedTwice, fmt.Sprintf("%s: line %d prepares %s for claim %s while claim %s holds %s", driver, i+1, a, uid, other, b)})
					}
				}
			}
		}
		held[uid] = mine
	}
	return out
}

// PreparedUIDs are the claim UIDs with a prepare line in a driver's
// --state-file.
func PreparedUIDs(state string) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, l := range strings.Split(state, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "prepare" {
			out[types.UID(f[1])] = true
		}
	}
	return out
}

// CheckPreparedVersions reports a claim kind (version, or kindUpstream)
// whose claims running pods held during the run (ran: claim UID to kind)
// none of which any driver prepared: the node agent prepares every claim of a pod before it runs,
// so the driver must have seen some. (Per claim this would be flaky: a
// kill can lose a prepare line, see CheckDriverState.)
func CheckPreparedVersions(ran map[types.UID]string, prepared map[types.UID]bool) []Violation {
	held, seen := map[string]int{}, map[string]int{}
	for uid, v := range ran {
		held[v]++
		if prepared[uid] {
			seen[v]++
		}
	}
	var out []Violation
	for _, v := range sortedKeys(held) {
		if seen[v] == 0 {
			out = append(out, Violation{RuleNeverPrepared, fmt.Sprintf("%d %ss held by running pods, none in a driver's state file", held[v], v)})
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
