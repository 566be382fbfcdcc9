package allocator_test

// The scenario harness: testdata/scenarios/*.txt are datadriven files
// (github.com/cockroachdb/datadriven) of commands with arguments, an
// input block, "----" and the expected output. testdata/scenarios/README.md
// lists the commands. The harness is an external test package on purpose:
// it reaches the allocator only through its exported API, as the scheduler
// and the simulation do, so the scenarios outlive rewrites of the
// internals.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"go.yaml.in/yaml/v3"
	k8scorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/scenarios/*.txt")

// TestScenarios runs every scenario file; -update rewrites their expected
// outputs (datadriven's -rewrite does the same).
func TestScenarios(t *testing.T) {
	if *update {
		if err := flag.Set("rewrite", "true"); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files (%v)", err)
	}
	cases := caseFilter(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			t.Parallel()
			w := &world{}
			run := func(t *testing.T, d *datadriven.TestData) string { return w.run(t, d) }
			if cases == nil {
				datadriven.RunTest(t, file, run)
				return
			}
			// datadriven reads a file in one pass and cannot skip a
			// subtest that -run leaves out: give it the file without them.
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			datadriven.RunTestFromString(t, withoutOtherCases(string(text), cases), run)
		})
	}
}

// caseFilter is the third element of -run (TestScenarios/FILE/CASE), which
// selects subtests, or nil.
func caseFilter(t *testing.T) *regexp.Regexp {
	parts := strings.Split(flag.Lookup("test.run").Value.String(), "/")
	if len(parts) < 3 {
		return nil
	}
	if *update {
		t.Fatal("-update rewrites whole files: run it without a case in -run")
	}
	re, err := regexp.Compile(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// withoutOtherCases blanks the subtests whose name cases does not match
// into comment lines, so that line numbers stay those of the file.
func withoutOtherCases(text string, cases *regexp.Regexp) string {
	lines := strings.Split(text, "\n")
	skip := false
	for i, l := range lines {
		if name, ok := strings.CutPrefix(l, "subtest "); ok && name != "end" && !cases.MatchString(name) {
			skip = true
		}
		if skip {
			end := l == "subtest end"
			lines[i] = "#"
			skip = !end
		}
	}
	return strings.Join(lines, "\n")
}

// scenarioCommands maps a command to its handler; each returns the output.
var scenarioCommands map[string]func(w *world, t *testing.T, d *datadriven.TestData) string

func init() {
	scenarioCommands = map[string]func(w *world, t *testing.T, d *datadriven.TestData) string{
		"base":       (*world).cmdBase,
		"objects":    (*world).cmdObjects,
		"reserve":    (*world).cmdReserve,
		"deallocate": (*world).cmdDeallocate,

		"allocate": (*world).cmdAllocate,
		"in-use":   (*world).cmdInUse,
		"pools":    (*world).cmdPools,
		"reach":    (*world).cmdReach,

		"device":       (*world).cmdDevice,
		"match":        (*world).cmdMatch,
		"compile":      (*world).cmdCompile,
		"compile-seed": (*world).cmdCompileSeed,

		"allocate-seed":       (*world).cmdAllocateSeed,
		"resolve":             (*world).cmdResolve,
		"claim-parameters":    (*world).cmdClaimParameters,
		"class-parameters":    (*world).cmdClassParameters,
		"match-seed":          (*world).cmdMatchSeed,
		"version":             (*world).cmdVersion,
		"model":               (*world).cmdModel,
		"validate-seed-names": (*world).cmdValidateSeedNames,
		"seed-conflict":       (*world).cmdSeedConflict,
	}
}

// world is what a scenario file has said so far: the objects of a
// cluster, in the order given, and the device of the match command.
type world struct {
	base, objs []object
	device     deviceInput
	test       string // the subtest the objects belong to
	// released and releasedSeed are claims as they were before deallocate.
	released     []*resourcev1.ResourceClaim
	releasedSeed []*resourceapi.ResourceClaim
}

// object is one decoded input object with its identity.
type object struct {
	key string // kind/namespace/name
	obj any
}

func (w *world) run(t *testing.T, d *datadriven.TestData) string {
	if t.Name() != w.test {
		// Every subtest starts from the base objects.
		w.test = t.Name()
		w.objs = slices.Clone(w.base)
		w.released, w.releasedSeed = nil, nil
	}
	cmd, ok := scenarioCommands[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return cmd(w, t, d)
}

// cmdBase sets the objects every subtest starts from, and starts from them.
func (w *world) cmdBase(t *testing.T, d *datadriven.TestData) string {
	w.base = nil
	for _, o := range decodeObjects(t, d) {
		w.base = putObject(w.base, o)
	}
	w.objs = slices.Clone(w.base)
	return ""
}

// cmdObjects adds objects, replacing those of the same kind, namespace
// and name.
func (w *world) cmdObjects(t *testing.T, d *datadriven.TestData) string {
	for _, o := range decodeObjects(t, d) {
		w.objs = putObject(w.objs, o)
	}
	return ""
}

// cmdReserve adds consumers=N pods to a v1 claim's reservedFor, for
// counts no one would write out.
func (w *world) cmdReserve(t *testing.T, d *datadriven.TestData) string {
	var name string
	var n int
	d.ScanArgs(t, "claim", &name)
	d.ScanArgs(t, "consumers", &n)
	c := w.v1Claim(t, d, name).DeepCopy()
	for i := range n {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: fmt.Sprintf("other-%d", i), UID: types.UID(fmt.Sprintf("other-%d", i))})
	}
	w.objs = putObject(w.objs, object{key: objectKey("ResourceClaim.v1", c.Namespace, c.Name), obj: c})
	return ""
}

// cmdDeallocate: deallocate claims=(a, b) clears the claims' allocations
// (v1 claims, else v1alpha2 ones); state=derived states then release them
// with WithoutAllocated.
func (w *world) cmdDeallocate(t *testing.T, d *datadriven.TestData) string {
	for _, key := range claimKeys(t, d) {
		if c := w.find("ResourceClaim.v1", key); c != nil {
			c := c.(*resourcev1.ResourceClaim)
			if c.Status.Allocation == nil {
				d.Fatalf(t, "claim %s is not allocated", key)
			}
			w.released = append(w.released, c)
			c = c.DeepCopy()
			c.Status.Allocation = nil
			w.objs = putObject(w.objs, object{key: objectKey("ResourceClaim.v1", c.Namespace, c.Name), obj: c})
			continue
		}
		c, ok := w.find("ResourceClaim.v1alpha2", key).(*resourceapi.ResourceClaim)
		if !ok || c.Status.Allocation == nil {
			d.Fatalf(t, "no allocated claim %s", key)
		}
		w.releasedSeed = append(w.releasedSeed, c)
		c = c.DeepCopy()
		c.Status.Allocation = nil
		w.objs = putObject(w.objs, object{key: objectKey("ResourceClaim.v1alpha2", c.Namespace, c.Name), obj: c})
	}
	return ""
}

// find is the object of that kind key and namespace/name, or nil.
func (w *world) find(kind, key string) any {
	for _, o := range w.objs {
		if o.key == kind+"/"+key {
			return o.obj
		}
	}
	return nil
}

func putObject(list []object, o object) []object {
	if i := slices.IndexFunc(list, func(x object) bool { return x.key == o.key }); i >= 0 {
		list = slices.Clone(list)
		list[i] = o
		return list
	}
	return append(list, o)
}

func objectKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// decodeObjects reads the input as YAML documents. Each names its
// apiVersion and kind; unknown fields are errors, so a typo cannot
// silently drop a field. Namespaced objects default to "default".
func decodeObjects(t *testing.T, d *datadriven.TestData) []object {
	var out []object
	for i, doc := range strings.Split(d.Input, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yamlToJSON(doc)
		if err != nil {
			d.Fatalf(t, "document %d: %v", i, err)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			d.Fatalf(t, "document %d: %v", i, err)
		}
		obj, kind, namespaced := newObject(tm)
		if obj == nil {
			d.Fatalf(t, "document %d: unknown apiVersion %q kind %q", i, tm.APIVersion, tm.Kind)
		}
		if err := decodeStrict(j, obj); err != nil {
			d.Fatalf(t, "document %d (%s): %v", i, tm.Kind, err)
		}
		meta := obj.(metav1.Object)
		if namespaced && meta.GetNamespace() == "" {
			meta.SetNamespace("default")
		}
		if meta.GetName() == "" {
			d.Fatalf(t, "document %d (%s): metadata.name is empty", i, tm.Kind)
		}
		out = append(out, object{key: objectKey(kind, meta.GetNamespace(), meta.GetName()), obj: obj})
	}
	return out
}

// yamlToJSON reads YAML 1.2 (only true and false are booleans: a node
// named n stays "n") and writes it as JSON.
func yamlToJSON(doc string) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// decodeStrict decodes JSON into out, refusing unknown fields.
func decodeStrict(j []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// newObject is an empty object of the type, its kind key, and whether it
// is namespaced.
func newObject(tm metav1.TypeMeta) (obj any, kind string, namespaced bool) {
	switch tm.APIVersion + " " + tm.Kind {
	case "resource.k8s.io/v1 ResourceSlice":
		return &resourcev1.ResourceSlice{}, "ResourceSlice", false
	case "resource.k8s.io/v1 DeviceClass":
		return &resourcev1.DeviceClass{}, "DeviceClass", false
	case "resource.k8s.io/v1 ResourceClaim":
		return &resourcev1.ResourceClaim{}, "ResourceClaim.v1", true
	case "resource.k8s.io/v1alpha2 NodeResourceSlice":
		return &resourceapi.NodeResourceSlice{}, "NodeResourceSlice", false
	case "resource.k8s.io/v1alpha2 ResourceClaim":
		return &resourceapi.ResourceClaim{}, "ResourceClaim.v1alpha2", true
	case "resource.k8s.io/v1alpha2 ResourceClass":
		return &resourceapi.ResourceClass{}, "ResourceClass", false
	case "resource.k8s.io/v1alpha2 ResourceClaimParameters":
		return &resourceapi.ResourceClaimParameters{}, "ResourceClaimParameters", true
	case "resource.k8s.io/v1alpha2 ResourceClassParameters":
		return &resourceapi.ResourceClassParameters{}, "ResourceClassParameters", true
	case "v1 Node":
		return &corev1.Node{}, "Node", false
	case "v1 Namespace":
		return &corev1.Namespace{}, "Namespace", false
	}
	if group, _, ok := strings.Cut(tm.APIVersion, "/"); ok && strings.Contains(group, ".") && !strings.HasSuffix(group, "k8s.io") {
		// A driver's own kind: a vendor parameters object.
		return &unstructured.Unstructured{}, "vendor." + tm.APIVersion + "." + tm.Kind, true
	}
	return nil, "", false
}

// all returns the world's objects of type T, in the order given.
func all[T any](w *world) []T {
	var out []T
	for _, o := range w.objs {
		if x, ok := o.obj.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// node is the Node object of that name, or a node without labels.
func (w *world) node(name string) *corev1.Node {
	for _, n := range all[*corev1.Node](w) {
		if n.Name == name {
			return n
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// claimKeys reads claims=(a, ns/b): claim keys, in the default namespace
// when none is given.
func claimKeys(t *testing.T, d *datadriven.TestData) []string {
	var keys []string
	for _, a := range d.CmdArgs {
		if a.Key != "claims" {
			continue
		}
		for _, v := range a.Vals {
			if !strings.Contains(v, "/") {
				v = "default/" + v
			}
			keys = append(keys, v)
		}
	}
	return keys
}

// stringArg is the value of key=value, or def.
func stringArg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key && len(a.Vals) > 0 {
			if a.Vals[0] == `""` {
				return ""
			}
			return a.Vals[0]
		}
	}
	return def
}

// nodeSelectorString prints a node selector on one line.
func nodeSelectorString(ns *k8scorev1.NodeSelector) string {
	if ns == nil {
		return "none"
	}
	var terms []string
	for _, term := range ns.NodeSelectorTerms {
		var reqs []string
		for _, r := range term.MatchExpressions {
			reqs = append(reqs, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		for _, r := range term.MatchFields {
			reqs = append(reqs, fmt.Sprintf("field %s %s %v", r.Key, r.Operator, r.Values))
		}
		terms = append(terms, strings.Join(reqs, " && "))
	}
	return "(" + strings.Join(terms, ") || (") + ")"
}
