package simulate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	"allot.dev/allot/pkg/allocator"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/*.txt")

// goldenCase is one "run" command of a golden file: YAML input, then the
// expected output after a "----" line, ended by a blank line.
type goldenCase struct {
	line   int
	cmd    string
	input  string
	output string
}

// TestGolden runs every testdata/*.txt scenario. Each file holds cases:
//
//	run [template=NODE] [max=N] [output=yaml]
//	<YAML documents>
//	----
//	<expected output>
//	<blank line>
//
// template=NODE takes the node NODE and its slices out of the cluster and
// uses them as the autoscaler's node template. go test -update rewrites
// the expected output.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			header, cases := parseGolden(t, string(data))
			var rewritten strings.Builder
			rewritten.WriteString(header)
			for i, c := range cases {
				got := runCase(t, c)
				if !*update && got != c.output {
					t.Errorf("%s:%d: output differs\n--- want\n%s\n--- got\n%s", f, c.line, c.output, got)
				}
				if i > 0 {
					rewritten.WriteString("\n")
				}
				fmt.Fprintf(&rewritten, "%s\n%s----\n%s\n", c.cmd, c.input, got)
			}
			if *update {
				if err := os.WriteFile(f, []byte(rewritten.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func parseGolden(t *testing.T, data string) (string, []goldenCase) {
	t.Helper()
	var header strings.Builder
	var cases []goldenCase
	var cur *goldenCase
	state := "header"
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case (state == "header" || state == "between") && strings.HasPrefix(line, "run"):
			cases = append(cases, goldenCase{line: n, cmd: line})
			cur, state = &cases[len(cases)-1], "input"
		case state == "header":
			header.WriteString(line + "\n")
		case state == "between":
			if strings.TrimSpace(line) != "" {
				t.Fatalf("line %d: expected a run command, got %q", n, line)
			}
		case state == "input" && line == "----":
			state = "output"
		case state == "input":
			cur.input += line + "\n"
		case state == "output" && line == "":
			state = "between"
		case state == "output":
			cur.output += line + "\n"
		}
	}
	for i := range cases {
		cases[i].output = strings.TrimSuffix(cases[i].output, "\n")
	}
	return header.String(), cases
}

func runCase(t *testing.T, c goldenCase) string {
	t.Helper()
	objs := decodeAll(t, c.input)
	args := map[string]string{}
	for _, f := range strings.Fields(c.cmd)[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	var opts Options
	if name := args["template"]; name != "" {
		objs, opts.Template = takeTemplate(t, objs, name)
	}
	if m := args["max"]; m != "" {
		opts.MaxNodes, _ = strconv.Atoi(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := Run(ctx, objs, opts)
	if err != nil {
		return "error: " + err.Error()
	}
	if args["output"] == "yaml" {
		return dumpYAML(t, out)
	}
	return describe(out)
}

func decodeAll(t *testing.T, input string) []runtime.Object {
	t.Helper()
	docs, err := scheme.SplitYAML(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, d := range docs {
		obj, _, err := scheme.Decode(d)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, d)
		}
		objs = append(objs, obj)
	}
	return objs
}

func takeTemplate(t *testing.T, objs []runtime.Object, name string) ([]runtime.Object, *allocator.NodeTemplate) {
	t.Helper()
	tmpl := &allocator.NodeTemplate{}
	var rest []runtime.Object
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Node:
			if v.Name == name {
				tmpl.Node = v
				continue
			}
		case *resourceapi.NodeResourceSlice:
			if v.Spec.NodeName == name {
				tmpl.Slices = append(tmpl.Slices, v)
				continue
			}
		case *resourcev1.ResourceSlice:
			if v.Spec.NodeName != nil && *v.Spec.NodeName == name {
				tmpl.V1Slices = append(tmpl.V1Slices, v)
				continue
			}
		}
		rest = append(rest, o)
	}
	if tmpl.Node == nil {
		t.Fatalf("template node %s not in input", name)
	}
	return rest, tmpl
}

// describe prints the outcome compactly, one fact per line.
func describe(out *Output) string {
	var b strings.Builder
	for _, p := range out.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	for _, w := range out.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, t := range out.DeviceTaints {
		fmt.Fprintf(&b, "device taint: %s\n", t)
	}
	decisions := map[string]Decision{}
	for _, d := range out.Decisions {
		decisions[d.Pod] = d
	}
	for _, p := range out.Pods {
		key := p.Namespace + "/" + p.Name
		d, pending := decisions[key]
		switch {
		case !pending:
			fmt.Fprintf(&b, "pod %s: bound to %s\n", key, p.Spec.NodeName)
		case d.Node != "":
			fmt.Fprintf(&b, "pod %s: scheduled to %s\n", key, d.Node)
		default:
			i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
			fmt.Fprintf(&b, "pod %s: not scheduled (%s)\n", key, p.Status.Conditions[i].Reason)
		}
		for _, r := range d.Results {
			if r.Fits {
				fmt.Fprintf(&b, "  %s: fits, score %d (capacity %d -> %d)\n", r.Node, r.Score, r.CapacityBefore, r.CapacityAfter)
				continue
			}
			for _, reason := range r.Reasons {
				fmt.Fprintf(&b, "  %s: %s: %s\n", r.Node, reason.Code, reason.Message)
			}
		}
	}
	for _, c := range out.Claims {
		describeClaim(&b, c)
	}
	for _, c := range out.V1Claims {
		describeClaimV1(&b, c)
	}
	if nn := out.NodesNeeded; nn != nil {
		fmt.Fprintf(&b, "nodes needed: %d %v capped=%v\n", nn.Nodes, nn.NodeNames, nn.Capped)
		keys := make([]string, 0, len(nn.Placements))
		for k := range nn.Placements {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s -> %s\n", k, nn.Placements[k])
		}
		keys = keys[:0]
		for k := range nn.Unplaceable {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, r := range nn.Unplaceable[k] {
				fmt.Fprintf(&b, "  %s unplaceable: %s\n", k, r.Message)
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func describeClaim(b *strings.Builder, c *resourceapi.ResourceClaim) {
	key := c.Namespace + "/" + c.Name
	a := c.Status.Allocation
	if a == nil {
		fmt.Fprintf(b, "claim %s: not allocated\n", key)
		return
	}
	var users []string
	for _, r := range c.Status.ReservedFor {
		users = append(users, r.Name)
	}
	var nodes []string
	for _, term := range a.AvailableOnNodes.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			nodes = append(nodes, f.Values...)
		}
	}
	fmt.Fprintf(b, "claim %s: allocated on %s by %s, shareable=%v, reserved for %v, finalizers %v\n",
		key, strings.Join(nodes, ","), c.Status.DriverName, a.Shareable, users, c.Finalizers)
	for _, h := range a.ResourceHandles {
		sd := h.StructuredData
		ids := make([]string, len(sd.Partitionable.Instances))
		for i, in := range sd.Partitionable.Instances {
			ids[i] = in.ID
		}
		fmt.Fprintf(b, "  %s on %s: %s (vendor class %s, vendor claim %s)\n", h.DriverName, sd.NodeName,
			strings.Join(ids, " "), rawKind(sd.VendorClassParameters), rawKind(sd.VendorClaimParameters))
	}
}

// describeClaimV1 prints a v1 claim's allocation as its status carries
// it: the devices by request, driver and pool, the node selector, the
// reservations.
func describeClaimV1(b *strings.Builder, c *resourcev1.ResourceClaim) {
	key := c.Namespace + "/" + c.Name
	a := c.Status.Allocation
	if a == nil {
		fmt.Fprintf(b, "v1 claim %s: not allocated\n", key)
		return
	}
	var users []string
	for _, r := range c.Status.ReservedFor {
		users = append(users, r.Name)
	}
	var nodes []string
	if a.NodeSelector != nil {
		for _, term := range a.NodeSelector.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				nodes = append(nodes, f.Values...)
			}
		}
	}
	fmt.Fprintf(b, "v1 claim %s: allocated on %s, reserved for %v, finalizers %v\n", key, strings.Join(nodes, ","), users, c.Finalizers)
	for _, r := range a.Devices.Results {
		fmt.Fprintf(b, "  %s: %s/%s/%s", r.Request, r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			// Share IDs are derived from the claim's UID, which the
			// simulation draws: a share is shown by what it consumes.
			var consumed []string
			for _, n := range slices.Sorted(maps.Keys(r.ConsumedCapacity)) {
				q := r.ConsumedCapacity[n]
				consumed = append(consumed, string(n)+"="+q.String())
			}
			fmt.Fprintf(b, " (a share: %s)", strings.Join(consumed, ", "))
		}
		fmt.Fprintln(b)
	}
}

func rawKind(r *runtime.RawExtension) string {
	if r == nil {
		return "-"
	}
	var tm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(r.Raw, &tm); err != nil {
		return "invalid"
	}
	return strings.TrimSpace(tm.Kind + " " + tm.Metadata.Name)
}

func dumpYAML(t *testing.T, out *Output) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range out.Pods {
		writeYAML(t, &b, p)
	}
	for _, c := range out.Claims {
		writeYAML(t, &b, c)
	}
	for _, c := range out.V1Claims {
		writeYAML(t, &b, c)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func writeYAML(t *testing.T, b *bytes.Buffer, obj any) {
	t.Helper()
	y, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("---\n")
	b.Write(bytes.TrimSpace(y))
	b.WriteString("\n")
}
