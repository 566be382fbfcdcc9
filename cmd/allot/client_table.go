package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
)

// tableAccept asks the server for a meta.k8s.io Table, as kubectl get does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"

// listQuery is what get asks for.
type listQuery struct {
	ns            string // "" for all namespaces or cluster-scoped kinds
	labelSelector string
	fieldSelector string
}

// resourcePath is the REST path of a kind's collection, or of one object.
func resourcePath(m *meta.RESTMapping, ns, name string) string {
	gv := m.Resource.GroupVersion()
	p := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		p = "/api/" + gv.Version
	}
	if namespaced(m) && ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + m.Resource.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

// getTable fetches one object (name set) or a list as a Table.
func (s *session) getTable(ctx context.Context, m *meta.RESTMapping, q listQuery, name string) (*metav1.Table, error) {
	req := s.c.RESTClient(corev1.SchemeGroupVersion).Get().AbsPath(resourcePath(m, q.ns, name)).
		SetHeader("Accept", tableAccept)
	if name == "" {
		req = withSelectors(req, q)
	}
	res := req.Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	body, err := res.Raw()
	if err != nil {
		return nil, fmt.Errorf("read table of %s: %w", m.Resource.Resource, err)
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(body, t); err != nil {
		return nil, fmt.Errorf("decode table of %s: %w", m.Resource.Resource, err)
	}
	if t.Kind != "Table" {
		return nil, fmt.Errorf("the server answered a %q for a table of %s", t.Kind, m.Resource.Resource)
	}
	return t, nil
}

func withSelectors(req *rest.Request, q listQuery) *rest.Request {
	if q.labelSelector != "" {
		req = req.Param("labelSelector", q.labelSelector)
	}
	if q.fieldSelector != "" {
		req = req.Param("fieldSelector", q.fieldSelector)
	}
	return req
}

// tableView decides which columns of a Table to print.
type tableView struct {
	wide      bool // priority > 0 columns too
	namespace bool // a NAMESPACE column first
	labels    bool // a LABELS column last
	kindName  string
}

func (v tableView) header(t *metav1.Table) []string {
	var out []string
	if v.namespace {
		out = append(out, "NAMESPACE")
	}
	for _, c := range t.ColumnDefinitions {
		if c.Priority == 0 || v.wide {
			out = append(out, strings.ToUpper(c.Name))
		}
	}
	if v.labels {
		out = append(out, "LABELS")
	}
	return out
}

func (v tableView) rows(t *metav1.Table) [][]string {
	out := make([][]string, 0, len(t.Rows))
	for _, r := range t.Rows {
		var cells []string
		if v.namespace {
			cells = append(cells, rowMeta(r).Namespace)
		}
		for i, c := range t.ColumnDefinitions {
			if i >= len(r.Cells) || (c.Priority > 0 && !v.wide) {
				continue
			}
			cell := formatCell(r.Cells[i])
			if c.Format == "name" && v.kindName != "" {
				cell = v.kindName + "/" + cell
			}
			cells = append(cells, cell)
		}
		if v.labels {
			cells = append(cells, formatLabels(rowMeta(r).Labels))
		}
		out = append(out, cells)
	}
	return out
}

// rowMeta reads the PartialObjectMetadata the server puts in each row.
func rowMeta(r metav1.TableRow) metav1.ObjectMeta {
	var pom metav1.PartialObjectMetadata
	if len(r.Object.Raw) > 0 {
		_ = json.Unmarshal(r.Object.Raw, &pom)
	}
	return pom.ObjectMeta
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(l))
	for _, k := range sortedKeys(l) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

func formatCell(v any) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// aligner prints rows in columns like kubectl's tab writer (a column is at
// least 6 wide with 3 spaces of padding) and remembers the widths, so rows
// printed later by a watch line up with the first ones.
type aligner struct {
	w      io.Writer
	widths []int
}

const (
	columnMinWidth = 6
	columnPadding  = 3
)

// measure widens the columns to fit rows.
func (a *aligner) measure(rows [][]string) {
	for _, r := range rows {
		for i, c := range r {
			for len(a.widths) <= i {
				a.widths = append(a.widths, columnMinWidth)
			}
			a.widths[i] = max(a.widths[i], utf8.RuneCountInString(c)+columnPadding)
		}
	}
}

// print measures and writes rows.
func (a *aligner) print(rows [][]string) {
	a.measure(rows)
	var b strings.Builder
	for _, r := range rows {
		b.Reset()
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", a.widths[i]-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
		_, _ = io.WriteString(a.w, b.String())
	}
}
