package allocator_test

// Scenario commands for resource.k8s.io/v1: allocate, in-use, pools,
// reach, device, match, compile.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"allot.dev/allot/pkg/allocator/engine"

	"github.com/cockroachdb/datadriven"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// scenarioPod is the pod whose claims allocate and allocate-seed judge.
func scenarioPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "default", UID: "pod-uid"}}
}

// v1Claim is the v1 claim of that key (or name, in default), with a UID
// as the API server would give it.
func (w *world) v1Claim(t *testing.T, d *datadriven.TestData, key string) *resourcev1.ResourceClaim {
	if !strings.Contains(key, "/") {
		key = "default/" + key
	}
	for _, c := range all[*resourcev1.ResourceClaim](w) {
		if c.Namespace+"/"+c.Name == key {
			if c.UID == "" {
				c = c.DeepCopy()
				c.UID = types.UID("uid-" + c.Name)
			}
			return c
		}
	}
	d.Fatalf(t, "no v1 ResourceClaim %s", key)
	return nil
}

// v1State is the v1 state of the world: its ResourceSlices and
// NodeResourceSlices, with every allocated v1 and v1alpha2 claim in use.
// state=derived derives it from an empty state instead: WithAllocated
// with those claims and the ones deallocate released, then
// WithoutAllocated with the released ones.
func (w *world) v1State(d *datadriven.TestData) *allocator.State {
	inv := allocator.NewInventory(all[*resourcev1.ResourceSlice](w), all[*resourceapi.NodeResourceSlice](w))
	var v1, seed = w.allocatedV1(), w.allocatedSeed()
	if stringArg(d, "state", "") == "derived" {
		return allocator.NewState(inv, nil, nil).WithAllocated(append(v1, w.released...)...).
			WithSeedAllocated(seed...).WithoutAllocated(w.released...)
	}
	return allocator.NewState(inv, v1, seed)
}

func (w *world) allocatedV1() []*resourcev1.ResourceClaim {
	var out []*resourcev1.ResourceClaim
	for _, c := range all[*resourcev1.ResourceClaim](w) {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) allocatedSeed() []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, c := range all[*resourceapi.ResourceClaim](w) {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	return out
}

// adminNamespace: the namespace carries resource.kubernetes.io/admin-access=true.
func (w *world) adminNamespace(ns string) bool {
	for _, n := range all[*corev1.Namespace](w) {
		if n.Name == ns {
			return n.Labels["resource.kubernetes.io/admin-access"] == "true"
		}
	}
	return false
}

// cmdAllocate: allocate node=NAME claims=(a, b) [state=derived] [full] [commit]
//
// Adds the input's objects, if any, to the world. Prepares the pod's v1 claims against the world's DeviceClasses and
// allocates them on the node. Prints whether they fit, the score and the
// devices per claim ("request=pool/device"), or the reasons. full adds
// each allocation result as YAML; commit writes the allocations into the
// claims, so that later commands see the devices in use.
func (w *world) cmdAllocate(t *testing.T, d *datadriven.TestData) string {
	w.cmdObjects(t, d)
	var claims []allocator.V1Claim
	for _, k := range claimKeys(t, d) {
		c := w.v1Claim(t, d, k)
		claims = append(claims, allocator.V1Claim{Claim: c, AdminNamespace: w.adminNamespace(c.Namespace)})
	}
	classes := all[*resourcev1.DeviceClass](w)
	req := allocator.PrepareV1(scenarioPod(), claims, func(name string) *resourcev1.DeviceClass {
		i := slices.IndexFunc(classes, func(c *resourcev1.DeviceClass) bool { return c.Name == name })
		if i < 0 {
			return nil
		}
		return classes[i]
	})
	node := w.node(stringArg(d, "node", "node-a"))
	st := w.v1State(d)
	res, err := allocator.AllocateV1(context.Background(), req, st, node)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	if !res.Fits {
		writeReasons(&b, req.Unresolvable(), res.Reasons)
		return b.String()
	}
	byName := map[string]*resourcev1.DeviceClass{}
	for _, c := range classes {
		byName[c.Name] = c
	}
	for _, msg := range checkV1Result(st.Inventory(), st, node, byName, claims, res) {
		t.Errorf("%s: invalid allocation: %s", d.Pos, msg)
	}
	fmt.Fprintf(&b, "fits, score %d\n", res.Score)
	for i, a := range res.Allocations {
		c := claims[i].Claim
		if a == nil {
			fmt.Fprintf(&b, "%s/%s: allocated already\n", c.Namespace, c.Name)
			continue
		}
		var devs []string
		for _, r := range a.Devices.Results {
			devs = append(devs, r.Request+"="+r.Pool+"/"+r.Device)
		}
		if devs == nil {
			devs = []string{"no devices"}
		}
		fmt.Fprintf(&b, "%s/%s: %s\n", c.Namespace, c.Name, strings.Join(devs, " "))
		if d.HasArg("full") {
			out, err := yaml.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(indent(string(out), "  "))
		}
		if d.HasArg("commit") {
			c = c.DeepCopy()
			c.Status.Allocation = a.DeepCopy()
			w.objs = putObject(w.objs, object{key: objectKey("ResourceClaim.v1", c.Namespace, c.Name), obj: c})
		}
	}
	return b.String()
}

// writeReasons prints pod-level reasons (Unresolvable) and the result's.
func writeReasons(b *strings.Builder, unresolvable, reasons []allocator.Reason) {
	b.WriteString("does not fit\n")
	if len(unresolvable) > 0 {
		b.WriteString("unresolvable:\n")
		writeReasonList(b, unresolvable)
		if slices.EqualFunc(unresolvable, reasons, func(a, b allocator.Reason) bool { return a.Message == b.Message }) {
			return
		}
	}
	b.WriteString("reasons:\n")
	writeReasonList(b, reasons)
}

func writeReasonList(b *strings.Builder, reasons []allocator.Reason) {
	for _, r := range reasons {
		fmt.Fprintf(b, "- %s: %s\n", r.Code, r.Message)
		if r.Clause != "" {
			fmt.Fprintf(b, "  clause: %s\n", r.Clause)
		}
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// cmdInUse: in-use [state=derived], input lines driver/pool/device: whether
// the world's state has each device in use.
func (w *world) cmdInUse(t *testing.T, d *datadriven.TestData) string {
	st := w.v1State(d)
	var b strings.Builder
	for _, line := range strings.Split(d.Input, "\n") {
		parts := strings.Split(strings.TrimSpace(line), "/")
		if len(parts) != 3 {
			d.Fatalf(t, "want driver/pool/device, got %q", line)
		}
		state := "free"
		if st.InUse(parts[0], parts[1], parts[2]) {
			state = "in use"
		}
		if n, used := st.Shares(parts[0], parts[1], parts[2]); n > 0 {
			var amounts []string
			for _, name := range slices.Sorted(maps.Keys(used)) {
				q := used[name]
				amounts = append(amounts, fmt.Sprintf("%s=%s", name, q.String()))
			}
			state = fmt.Sprintf("%d shares (%s)", n, strings.Join(amounts, ", "))
		}
		fmt.Fprintf(&b, "%s: %s\n", line, state)
	}
	return b.String()
}

// cmdPools: pools v1|seed|inventory, after adding the input's objects to
// the world. v1 prints V1Pools of the world's
// ResourceSlices, seed SeedDevices of its NodeResourceSlices, inventory
// NewInventory of both; then the problems.
func (w *world) cmdPools(t *testing.T, d *datadriven.TestData) string {
	w.cmdObjects(t, d)
	var pools []engine.Pool
	var problems []engine.InventoryProblem
	switch {
	case d.HasArg("v1"):
		pools, problems = allocator.V1Pools(all[*resourcev1.ResourceSlice](w))
	case d.HasArg("seed"):
		pools, problems = allocator.SeedDevices(all[*resourceapi.NodeResourceSlice](w))
	case d.HasArg("inventory"):
		inv := allocator.NewInventory(all[*resourcev1.ResourceSlice](w), all[*resourceapi.NodeResourceSlice](w))
		pools, problems = inv.Pools(), inv.Problems()
	default:
		d.Fatalf(t, "pools needs v1, seed or inventory")
	}
	var b strings.Builder
	for i := range pools {
		writePool(&b, &pools[i])
	}
	for _, p := range problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	return b.String()
}

func writePool(b *strings.Builder, p *engine.Pool) {
	fmt.Fprintf(b, "pool %s/%s generation %d", p.Driver, p.Name, p.Generation)
	if p.Node != "" {
		fmt.Fprintf(b, " node %s", p.Node)
	}
	if p.FromSeed {
		b.WriteString(" from seed")
	}
	b.WriteString("\n")
	if p.Incomplete != "" {
		fmt.Fprintf(b, "  incomplete: %s\n", p.Incomplete)
	}
	if p.Invalid != "" {
		fmt.Fprintf(b, "  invalid: %s\n", p.Invalid)
	}
	for _, set := range sortedKeys(p.Counters) {
		var cs []string
		for _, n := range sortedKeys(p.Counters[set]) {
			q := p.Counters[set][n]
			cs = append(cs, n+"="+q.String())
		}
		fmt.Fprintf(b, "  counters %s: %s\n", set, strings.Join(cs, " "))
	}
	for i := range p.Devices {
		writeDevice(b, &p.Devices[i])
	}
}

func writeDevice(b *strings.Builder, dev *engine.Device) {
	fmt.Fprintf(b, "  device %s slice %s", dev.Name, dev.Slice)
	switch {
	case dev.NodeName != "":
		fmt.Fprintf(b, " on %s", dev.NodeName)
	case dev.AllNodes:
		b.WriteString(" on all nodes")
	case dev.NodeSelector != nil:
		fmt.Fprintf(b, " on %s", nodeSelectorString(dev.NodeSelector))
	default:
		b.WriteString(" on no node")
	}
	if dev.SeedInstance != "" {
		fmt.Fprintf(b, " seed %s", dev.SeedInstance)
	}
	b.WriteString("\n")
	if len(dev.Attributes) > 0 {
		var as []string
		for _, n := range sortedKeys(dev.Attributes) {
			as = append(as, string(n)+"="+attributeString(dev.Attributes[n]))
		}
		fmt.Fprintf(b, "    attributes: %s\n", strings.Join(as, " "))
	}
	if len(dev.Capacity) > 0 {
		var cs []string
		for _, n := range sortedKeys(dev.Capacity) {
			c := dev.Capacity[n]
			cs = append(cs, string(n)+"="+c.Value.String())
		}
		fmt.Fprintf(b, "    capacity: %s\n", strings.Join(cs, " "))
	}
	for _, c := range dev.ConsumesCounters {
		var cs []string
		for _, n := range sortedKeys(c.Counters) {
			q := c.Counters[n].Value
			cs = append(cs, n+"="+q.String())
		}
		fmt.Fprintf(b, "    consumes %s: %s\n", c.CounterSet, strings.Join(cs, " "))
	}
	for _, taint := range dev.Taints {
		fmt.Fprintf(b, "    taint %s=%s:%s\n", taint.Key, taint.Value, taint.Effect)
	}
}

// attributeString is a v1 attribute value with its type: "s", 1, true,
// v1.2.3.
func attributeString(a resourcev1.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return fmt.Sprintf("%q", *a.StringValue)
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	case a.VersionValue != nil:
		return "v" + *a.VersionValue
	}
	return "?"
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cmdReach: reach [node=NAME] [labels=(k=v, ...)]: the pools of V1Pools
// and SeedDevices that reach the node (ReachesNode) and their devices
// available on it (AvailableOn); without node, a nil node.
func (w *world) cmdReach(t *testing.T, d *datadriven.TestData) string {
	var node *corev1.Node
	if name := stringArg(d, "node", ""); name != "" {
		node = w.node(name).DeepCopy()
		for _, a := range d.CmdArgs {
			if a.Key != "labels" {
				continue
			}
			node.Labels = map[string]string{}
			for _, kv := range a.Vals {
				k, v, _ := strings.Cut(kv, "=")
				node.Labels[k] = v
			}
		}
	}
	pools, _ := allocator.V1Pools(all[*resourcev1.ResourceSlice](w))
	seed, _ := allocator.SeedDevices(all[*resourceapi.NodeResourceSlice](w))
	pools = append(pools, seed...)
	var reach, devs []string
	for i := range pools {
		if pools[i].ReachesNode(allocator.NodeOf(node)) {
			reach = append(reach, pools[i].Name)
		}
		for _, dev := range pools[i].Devices {
			on := allocator.DeviceAvailableOn(&dev, node)
			// A device built by hand (no converted selector) answers alike.
			bare := engine.Device{Name: dev.Name, NodeName: dev.NodeName, NodeSelector: dev.NodeSelector, AllNodes: dev.AllNodes}
			if allocator.DeviceAvailableOn(&bare, node) != on {
				t.Errorf("%s: a hand-built copy of device %s answers AvailableOn differently", d.Pos, dev.Name)
			}
			if on {
				devs = append(devs, dev.Name)
			}
		}
	}
	slices.Sort(reach)
	return fmt.Sprintf("pools: %s\ndevices: %s\n", strings.Join(reach, " "), strings.Join(devs, " "))
}

// deviceInput is the device of the match command.
type deviceInput = engine.DeviceSelectorInput

// cmdDevice: device driver=NAME [allowMultipleAllocations], input a v1
// Device's attributes and capacity in YAML: the device match evaluates
// selectors against.
func (w *world) cmdDevice(t *testing.T, d *datadriven.TestData) string {
	var dev resourcev1.Device
	j, err := yamlToJSON(d.Input)
	if err == nil {
		err = decodeStrict(j, &dev)
	}
	if err != nil {
		d.Fatalf(t, "device: %v", err)
	}
	w.device = deviceInput{Driver: stringArg(d, "driver", ""), Attributes: dev.Attributes, Capacity: dev.Capacity,
		AllowMultipleAllocations: d.HasArg("allowMultipleAllocations")}
	return ""
}

// cmdMatch: input v1 CEL selectors, one a line; prints for each, on the
// same line of the output, true, false, or MatchDeviceSelector's error
// against the device: "invalid:" when it wraps ErrInvalidSelector (the
// selector does not compile), "error:" when evaluating it failed.
func (w *world) cmdMatch(t *testing.T, d *datadriven.TestData) string {
	return eachLine(d, func(expr string) string {
		ok, err := engine.MatchDeviceSelector(strings.TrimSpace(expr), w.device)
		switch {
		case err != nil && ok:
			t.Errorf("%s: %s: true with an error %v", d.Pos, expr, err)
			return ""
		case errors.Is(err, allocator.ErrInvalidSelector):
			return "invalid: " + oneLine(err)
		case err != nil:
			return "error: " + oneLine(err)
		}
		return fmt.Sprint(ok)
	})
}

// eachLine answers every input line at once, as the selector tables ran
// their cases in parallel (a selector that runs into the cost limit takes
// tens of milliseconds), and prints the answers in input order.
func eachLine(d *datadriven.TestData, answer func(line string) string) string {
	lines := strings.Split(d.Input, "\n")
	out := make([]string, len(lines))
	var wg sync.WaitGroup
	for i, line := range lines {
		wg.Go(func() { out[i] = answer(line) })
	}
	wg.Wait()
	return strings.Join(out, "\n") + "\n"
}

// cmdCompile: input v1 CEL selectors, one a line; prints ok or the
// CompileDeviceSelector error for each. Errors must wrap
// ErrInvalidSelector, and a second call must agree with the first.
func (w *world) cmdCompile(t *testing.T, d *datadriven.TestData) string {
	return compileLines(t, d, allocator.CompileDeviceSelector)
}

func compileLines(t *testing.T, d *datadriven.TestData, compile func(string) error) string {
	return eachLine(d, func(line string) string {
		expr := literalLine(line)
		err := compile(expr)
		if again := compile(expr); (again == nil) != (err == nil) {
			t.Errorf("%s: %s: the cached answer %v differs from %v", d.Pos, expr, again, err)
		}
		if err == nil {
			return "ok"
		}
		if !errors.Is(err, allocator.ErrInvalidSelector) {
			t.Errorf("%s: %s: error %v does not wrap ErrInvalidSelector", d.Pos, expr, err)
		}
		return "error: " + oneLine(err)
	})
}

// literalLine is an input line without surrounding blanks, or, when it
// is one Go string literal ("" or "  "), the literal's value.
func literalLine(line string) string {
	line = strings.TrimSpace(line)
	if v, err := strconv.Unquote(line); err == nil {
		return v
	}
	return line
}

// oneLine is an error's text with line breaks written " | ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }
