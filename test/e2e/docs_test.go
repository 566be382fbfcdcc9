package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The manifests the documentation shows must work as written on the
// cluster that `make run` starts (`allot up --demo`). docManifests finds
// them: every fenced ```yaml block of docs/*.md and README.md that
// contains a `kind:` line. A block that is deliberately a fragment is
// marked with notAManifest on the line before its fence.
const notAManifest = "<!-- not a manifest -->"

// docBlock is one manifest block of a document.
type docBlock struct {
	file string // relative to the module root
	line int    // of the opening fence, 1-based
	text string
	objs []docObject
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// docObject is what a test needs to know of one document of a manifest.
type docObject struct {
	apiVersion, kind, namespace, name string
}

// qualifiedKind is how allot's client commands name the kind
// ("resourceclaimtemplate.resource.k8s.io", "pod").
func (o docObject) qualifiedKind() string {
	k := strings.ToLower(o.kind)
	if g, _, ok := strings.Cut(o.apiVersion, "/"); ok {
		k += "." + g
	}
	return k
}

func (o docObject) String() string {
	if o.namespace == "" {
		return o.qualifiedKind() + "/" + o.name
	}
	return o.qualifiedKind() + "/" + o.name + " -n " + o.namespace
}

var (
	fenceRE = regexp.MustCompile("^\\s*```\\s*(\\S*)")
	kindRE  = regexp.MustCompile(`(?m)^\s*kind:\s*\S`)
	sepRE   = regexp.MustCompile(`(?m)^---\s*$`)
)

// docManifests returns the manifest blocks of docs/*.md and README.md in
// file order, each parsed.
func docManifests(t *testing.T, root string) []docBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	var out []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		blocks, err := manifestBlocks(rel, string(data))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, blocks...)
	}
	return out
}

// manifestBlocks extracts and parses the manifest blocks of one Markdown
// document. A notAManifest marker that does not precede a YAML block with
// a kind is an error, so that markers do not outlive their reason.
func manifestBlocks(file, doc string) ([]docBlock, error) {
	var (
		out       []docBlock
		cur       *docBlock
		body      strings.Builder
		lang      string
		prev      string // the last non-blank line outside a fence
		skip      bool
		markerAt  int
		inFence   bool
		lineNo    int
		sc        = bufio.NewScanner(strings.NewReader(doc))
		staleMark = func(at int) error {
			return fmt.Errorf("%s:%d: %s must stand right before a ```yaml block that holds a kind:", file, at, notAManifest)
		}
	)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		m := fenceRE.FindStringSubmatch(line)
		switch {
		case !inFence && m != nil:
			inFence, lang = true, m[1]
			skip = strings.TrimSpace(prev) == notAManifest
			if skip {
				markerAt = lineNo - 1
			}
			cur = &docBlock{file: file, line: lineNo}
			body.Reset()
		case inFence && m != nil && m[1] == "":
			inFence = false
			text := body.String()
			isManifest := lang == "yaml" && kindRE.MatchString(text)
			switch {
			case skip && !isManifest:
				return nil, staleMark(markerAt)
			case isManifest && !skip:
				cur.text = text
				objs, err := parseManifest(text)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", cur, err)
				}
				cur.objs = objs
				out = append(out, *cur)
			}
			prev = line
		case inFence:
			body.WriteString(line)
			body.WriteByte('\n')
		default:
			if strings.TrimSpace(line) != "" {
				if strings.TrimSpace(prev) == notAManifest {
					return nil, staleMark(lineNo - 1)
				}
				prev = line
			}
		}
	}
	if inFence {
		return nil, fmt.Errorf("%s:%d: fence never closed", file, cur.line)
	}
	return out, sc.Err()
}

// parseManifest reads the documents of a multi-document manifest.
func parseManifest(text string) ([]docObject, error) {
	var out []docObject
	for i, d := range sepRE.Split(text, -1) {
		var m struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if m.Kind == "" && m.APIVersion == "" && m.Metadata.Name == "" {
			continue // only comments
		}
		if m.Kind == "" || m.APIVersion == "" || m.Metadata.Name == "" {
			return nil, fmt.Errorf("document %d: want apiVersion, kind and metadata.name, got %q %q %q",
				i+1, m.APIVersion, m.Kind, m.Metadata.Name)
		}
		out = append(out, docObject{apiVersion: m.APIVersion, kind: m.Kind, namespace: m.Metadata.Namespace, name: m.Metadata.Name})
	}
	return out, nil
}

// TestDocsManifestsExtract checks the extractor on the real documents,
// without a cluster: the manifests parse, markers stand where they belong,
// and the quota example TestDocsManifests checks is among them.
func TestDocsManifestsExtract(t *testing.T) {
	blocks := docManifests(t, repoRoot(t))
	quotas := 0
	for _, b := range blocks {
		t.Logf("%s: %v", b, b.objs)
		for _, o := range b.objs {
			if o.kind == "ResourceQuota" {
				quotas++
			}
		}
	}
	if len(blocks) < 5 || quotas == 0 {
		t.Errorf("found %d manifest blocks, %d ResourceQuotas in docs/*.md and README.md; want at least 5 and the user guide's quota", len(blocks), quotas)
	}

	// The extractor itself: a marked fragment is skipped, a stale marker
	// is an error, a block without kind or of another language is no
	// manifest.
	doc := "text\n\n```yaml\nresources: {limits: {a: 1}}\n```\n\n" + notAManifest + "\n```yaml\nkind: Pod\nspec: {}\n```\n\n" +
		"```sh\nkind: x\n```\n\n```yaml\n# c\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n" +
		"apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceClaim\nmetadata: {name: b, namespace: a}\n```\n"
	got, err := manifestBlocks("x.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].line != 17 || fmt.Sprint(got[0].objs) != "[namespace/a resourceclaim.resource.k8s.io/b -n a]" {
		t.Errorf("manifestBlocks = %+v, want the block at line 17 with namespace/a and resourceclaim b", got)
	}
	if _, err := manifestBlocks("x.md", notAManifest+"\n```sh\nls\n```\n"); err == nil {
		t.Error("a marker before a sh block: no error")
	}
	if _, err := manifestBlocks("x.md", notAManifest+"\n\ntext\n"); err == nil {
		t.Error("a marker before text: no error")
	}
	if _, err := manifestBlocks("x.md", "```yaml\nkind: Pod\nmetadata: {name: x}\n```\n"); err == nil {
		t.Error("a manifest without apiVersion: no error")
	}
}

// TestDocsManifests applies every manifest the documentation shows to an
// `allot up --demo` cluster (the cluster of `make run`, with the example
// device plugin and DRA drivers) with `allot apply`, as the docs do, and
// requires
//   - the server to accept each, and none to change an object the demo
//     installed (a doc's class that disagreed with the driver's would
//     reconfigure it),
//   - each ResourceQuota to count the claims already in its namespace, so
//     that the example limits something (the demo's claims),
//   - each Pod to be scheduled, its claims allocated;
//
// then deletes what it created. The manifest files under examples/ that
// the docs point to get the same apply and delete, and seed-002.yaml the
// `allot simulate` of the README.
func TestDocsManifests(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	root := repoRoot(t)
	blocks := docManifests(t, root)

	c := newCluster(t)
	c.start(t, "--demo", "--disable", "", "--demo-timeout", "2m",
		"--pod-resources-socket", filepath.Join(c.dataDir, "pod-resources.sock"),
		"--admit-retry-interval", "200ms", "--relist-interval", "200ms")
	t.Cleanup(func() {
		// The node stops every pod's containers before allot up stops.
		if _, stderr, err := c.runKubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=1",
			"--wait=true", "--timeout=60s"); err != nil {
			t.Logf("delete pods: %v: %s", err, stderr)
		}
	})
	line, _, err := c.p.Stdout.WaitFor(0, 3*time.Minute, func(s string) bool { return strings.HasPrefix(s, "demo: pod demo/demo ") })
	if err != nil || line != "demo: pod demo/demo Succeeded" {
		t.Fatalf("demo: %q, %v\nstdout:\n%s", line, err, c.p.Stdout)
	}
	dir := t.TempDir()

	// The docs' manifests, in one apply (namespaces first, as allot apply
	// orders them); each file is named after its block.
	args := []string{"apply"}
	var objs []docObject
	for _, b := range blocks {
		f := filepath.Join(dir, strings.NewReplacer("/", "_", ".md", "").Replace(b.file)+"-L"+strconv.Itoa(b.line)+".yaml")
		if err := os.WriteFile(f, []byte(b.text), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
		objs = append(objs, b.objs...)
	}
	created := requireApplied(t, "the docs' manifests", docsAllot(t, c, args...), objs, true)

	t.Run("quota counts", func(t *testing.T) {
		for _, o := range objs {
			if o.kind == "ResourceQuota" {
				requireQuotaCounts(t, c, o)
			}
		}
	})
	t.Run("pods scheduled", func(t *testing.T) {
		for _, o := range objs {
			if o.kind == "Pod" {
				requireScheduled(t, c, o)
			}
		}
	})
	deleteObjects(t, c, dir, "docs", created, 1)

	// The files under examples/: the drivers' deploy manifests (applied by
	// the demo already), the workloads, and seed-002.yaml last: its Node
	// worker-1 has no agent, so its pods are deleted at once.
	var files []string
	for _, g := range []string{"examples/*/deploy/*.yaml", "examples/*/deploy/example/*.yaml", "examples/manifests/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	seed := filepath.Join(root, "examples/manifests/seed-002.yaml")
	sort.SliceStable(files, func(i, j int) bool { return files[i] != seed && files[j] == seed })
	if len(files) < 6 || files[len(files)-1] != seed {
		t.Fatalf("example manifests: %v, want the deploy and example files and seed-002.yaml last", files)
	}
	out := c.allot(t, "simulate", "-f", seed)
	requireContains(t, "allot simulate -f examples/manifests/seed-002.yaml", out, "kind: List", "name: card-user")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		objs, err := parseManifest(string(data))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		created := requireApplied(t, rel, docsAllot(t, c, "apply", "-f", f), objs, false)
		grace := 1
		if f == seed {
			grace = 0
		}
		deleteObjects(t, c, dir, filepath.Base(f), created, grace)
	}
}

// requireApplied checks the output of allot apply: every object created
// or unchanged, or configured where that is allowed. It returns the
// objects created. (The demo's own files may say configured: allot apply,
// like kubectl, finds a difference between a quantity written as a
// number, `example.com/gpu: 1`, and the string the server stores.)
func requireApplied(t *testing.T, what, out string, objs []docObject, mustNotConfigure bool) []docObject {
	t.Helper()
	verb := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, v, _ := strings.Cut(l, " ")
		verb[name] = v
	}
	var created []docObject
	for _, o := range objs {
		key := o.qualifiedKind() + "/" + o.name
		switch verb[key] {
		case "created":
			created = append(created, o)
		case "unchanged":
		case "configured":
			if !mustNotConfigure {
				break
			}
			t.Errorf("allot apply of %s changed %s, which `allot up --demo` installed: the manifest disagrees with what the demo applies", what, o)
		default:
			t.Errorf("allot apply of %s: no line for %s in:\n%s", what, key, out)
		}
	}
	return created
}

// requireQuotaCounts requires a quota to have a usage for each of its
// limits, equal to the claims of its namespace it counts, and that
// usage not to be zero: on the demo cluster the demo pod's claims count.
func requireQuotaCounts(t *testing.T, c *cluster, o docObject) {
	t.Helper()
	var q struct {
		Spec   struct{ Hard map[string]string }
		Status struct{ Used map[string]string }
	}
	getJSON(t, c, &q, "resourcequota", o.name, "-n", o.namespace)
	var claims struct {
		Items []struct {
			Spec struct{ ResourceClassName string }
		}
	}
	getJSON(t, c, &claims, v1alpha2Claims, "-n", o.namespace)
	want := map[string]int{"count/resourceclaims.resource.k8s.io": len(claims.Items)}
	for _, cl := range claims.Items {
		want[cl.Spec.ResourceClassName+".resourceclass.resource.k8s.io/resourceclaims"]++
	}
	if len(q.Spec.Hard) == 0 {
		t.Errorf("quota %s limits nothing", o)
	}
	for name := range q.Spec.Hard {
		used, ok := q.Status.Used[name]
		switch {
		case !ok:
			t.Errorf("quota %s: no usage for %s (status.used %v): allot does not count it", o, name, q.Status.Used)
		case used != strconv.Itoa(want[name]):
			t.Errorf("quota %s: used %s = %s, want %d (the claims in namespace %s)", o, name, used, want[name], o.namespace)
		case want[name] == 0:
			t.Errorf("quota %s: %s counts none of the %d claims in namespace %s (classes: %v): the example limits nothing on the demo cluster",
				o, name, len(claims.Items), o.namespace, want)
		}
	}
}

// requireScheduled waits until a pod is bound to a node: its claims are
// allocated and reserved for it.
func requireScheduled(t *testing.T, c *cluster, o docObject) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var p struct {
			Spec   struct{ NodeName string }
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string }
			}
		}
		getJSON(t, c, &p, "pod", o.name, "-n", o.namespace)
		if p.Spec.NodeName != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pod %s not scheduled after 60s; conditions %+v\n%s", o, p.Status.Conditions,
				docsAllot(t, c, "explain", "pod", o.name, "-n", o.namespace))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getJSON reads objects with allot get -o json.
func getJSON(t *testing.T, c *cluster, into any, args ...string) {
	t.Helper()
	out := docsAllot(t, c, append(append([]string{"get"}, args...), "-o", "json")...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("allot get %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// deleteObjects deletes the objects an apply created, pods first and
// namespaces last, without waiting (the test's cleanup waits for the
// pods); grace is the pods' grace period.
func deleteObjects(t *testing.T, c *cluster, dir, name string, objs []docObject, grace int) {
	t.Helper()
	if len(objs) == 0 {
		return
	}
	rank := func(o docObject) int {
		switch o.kind {
		case "Pod":
			return 0
		case "Namespace":
			return 3
		case "CustomResourceDefinition":
			return 2
		}
		return 1
	}
	objs = append([]docObject(nil), objs...)
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata: {name: %q, namespace: %q}\n---\n", o.apiVersion, o.kind, o.name, o.namespace)
	}
	f := filepath.Join(dir, "delete-"+name+".yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	docsAllot(t, c, "delete", "-f", f, "--wait=false", "--grace-period="+strconv.Itoa(grace))
}

// docsAllot runs an allot client command against the cluster's
// kubeconfig.
func docsAllot(t *testing.T, c *cluster, args ...string) string {
	t.Helper()
	return c.allot(t, append(args, "--kubeconfig="+c.kubeconfig)...)
}
