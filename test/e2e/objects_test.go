package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// table is kubectl's default (table) output: the header and, per row, the
// cells by column name.
type table struct {
	header []string
	rows   []map[string]string
}

// headerCell is one column title: words separated by single spaces (kubectl
// separates columns by at least three).
var headerCell = regexp.MustCompile(`\S+( \S+)*`)

// parseTable splits kubectl's table output by the header's column starts.
func parseTable(t *testing.T, out string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		t.Fatalf("parse kubectl table: no header in %q", out)
	}
	locs := headerCell.FindAllStringIndex(lines[0], -1)
	var tb table
	for _, l := range locs {
		tb.header = append(tb.header, lines[0][l[0]:l[1]])
	}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, l := range locs {
			start, end := l[0], len(line)
			if i+1 < len(locs) {
				end = min(locs[i+1][0], len(line))
			}
			if start < len(line) {
				row[tb.header[i]] = strings.TrimSpace(line[start:end])
			}
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// requireTable checks the header and, for each named row, the given cells.
func requireTable(t *testing.T, out string, header []string, want map[string]map[string]string) {
	t.Helper()
	tb := parseTable(t, out)
	if strings.Join(tb.header, "|") != strings.Join(header, "|") {
		t.Errorf("table header = %q, want %q\n%s", tb.header, header, out)
	}
	for name, cells := range want {
		var row map[string]string
		for _, r := range tb.rows {
			if r["NAME"] == name {
				row = r
			}
		}
		if row == nil {
			t.Errorf("table has no row NAME=%s:\n%s", name, out)
			continue
		}
		for col, v := range cells {
			if row[col] != v {
				t.Errorf("table row %s: %s = %q, want %q\n%s", name, col, row[col], v, out)
			}
		}
	}
}

// requireLines checks that out has exactly the wanted lines, in any order.
func requireLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	want = append([]string(nil), want...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s printed:\n%s\nwant (any order):\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// getYAML runs kubectl get -o yaml for one object and decodes it.
func (c *cluster) getYAML(t *testing.T, args ...string) map[string]any {
	t.Helper()
	return c.getYAMLWith(t, c.kubectl, args...)
}

// getYAMLWith runs get -o yaml with run (c.kubectl or c.allot) and decodes
// the object.
func (c *cluster) getYAMLWith(t *testing.T, run func(*testing.T, ...string) string, args ...string) map[string]any {
	t.Helper()
	out := run(t, append(append([]string{"get"}, args...), "-o", "yaml")...)
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(out), &obj); err != nil {
		t.Fatalf("decode get %s -o yaml: %v\n%s", strings.Join(args, " "), err, out)
	}
	return obj
}

// field returns the value at path (map keys and slice indexes) in obj.
func field(obj any, path ...any) (any, bool) {
	cur := obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			s, ok := cur.([]any)
			if !ok || k >= len(s) {
				return nil, false
			}
			cur = s[k]
		}
	}
	return cur, true
}

// requireFields checks values in a decoded object, each path given as
// "a.b.0.c" (numbers index lists).
func requireFields(t *testing.T, what string, obj map[string]any, want map[string]any) {
	t.Helper()
	for p, w := range want {
		var path []any
		for _, part := range strings.Split(p, ".") {
			var i int
			if _, err := fmt.Sscanf(part, "%d", &i); err == nil && fmt.Sprint(i) == part {
				path = append(path, i)
			} else {
				path = append(path, part)
			}
		}
		got, ok := field(obj, path...)
		switch {
		case !ok:
			t.Errorf("%s: no field %s", what, p)
		case w == nonEmpty:
			if s, _ := got.(string); s == "" {
				t.Errorf("%s: %s = %v, want a non-empty string", what, p, got)
			}
		case fmt.Sprint(got) != fmt.Sprint(w):
			t.Errorf("%s: %s = %v, want %v", what, p, got, w)
		}
	}
}

// nonEmpty in requireFields asks for any non-empty string.
const nonEmpty = "<non-empty>"

// jsonpath returns kubectl get ARGS -o jsonpath=EXPR.
func (c *cluster) jsonpath(t *testing.T, expr string, args ...string) string {
	t.Helper()
	return c.kubectl(t, append(append([]string{"get"}, args...), "-o", "jsonpath="+expr)...)
}

// objectID names an object in a snapshot.
type objectID struct{ kind, namespace, name string }

func (id objectID) String() string {
	if id.namespace == "" {
		return id.kind + "/" + id.name
	}
	return id.kind + "/" + id.namespace + "/" + id.name
}

// objectVersion is what must survive a restart unchanged.
type objectVersion struct{ uid, resourceVersion string }

// snapshotKinds are all kinds the suites create.
const snapshotKinds = "namespaces,nodes,pods,resourceclasses,resourceclaims,resourceclaimparameters," +
	"noderesourceslices,customresourcedefinitions,cardparameters.dra.example.com"

// snapshot lists every object of snapshotKinds with kubectl get -o json.
func (c *cluster) snapshot(t *testing.T) map[objectID]objectVersion {
	t.Helper()
	out := c.kubectl(t, "get", snapshotKinds, "--all-namespaces", "-o", "json")
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name            string `json:"name"`
				Namespace       string `json:"namespace"`
				UID             string `json:"uid"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode kubectl get %s -o json: %v", snapshotKinds, err)
	}
	snap := map[objectID]objectVersion{}
	for _, it := range list.Items {
		m := it.Metadata
		if m.UID == "" || m.ResourceVersion == "" {
			t.Errorf("%s %s/%s has uid %q and resourceVersion %q, want both set", it.Kind, m.Namespace, m.Name, m.UID, m.ResourceVersion)
		}
		snap[objectID{it.Kind, m.Namespace, m.Name}] = objectVersion{m.UID, m.ResourceVersion}
	}
	return snap
}

// requireSameObjects checks that after holds exactly the objects of before
// with the same uids and resourceVersions.
func requireSameObjects(t *testing.T, before, after map[objectID]objectVersion) {
	t.Helper()
	for id, b := range before {
		a, ok := after[id]
		switch {
		case !ok:
			t.Errorf("after restart: %s is gone (had uid %s, resourceVersion %s)", id, b.uid, b.resourceVersion)
		case a != b:
			t.Errorf("after restart: %s has uid %s resourceVersion %s, want uid %s resourceVersion %s (unchanged)",
				id, a.uid, a.resourceVersion, b.uid, b.resourceVersion)
		}
	}
	for id, a := range after {
		if _, ok := before[id]; !ok {
			t.Errorf("after restart: unexpected new object %s (uid %s, resourceVersion %s)", id, a.uid, a.resourceVersion)
		}
	}
}

// requireContains checks that s contains every part.
func requireContains(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s = %q, want it to contain %q", what, s, p)
		}
	}
}
