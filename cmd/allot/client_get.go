package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

type getOptions struct {
	cf            clientFlags
	allNamespaces bool
	output        string
	labelSelector string
	fieldSelector string
	watch         bool
	noHeaders     bool
	showLabels    bool
	// showManaged keeps metadata.managedFields in -o yaml and json;
	// kubectl leaves them out by default too.
	showManaged bool
}

// getRequest is one kind to get, with the names asked for (none: list).
type getRequest struct {
	mapping *meta.RESTMapping
	names   []string
}

func newGetCommand() *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get KIND[,KIND...] [NAME...] | get KIND/NAME...",
		Short: "Show objects as a table, YAML, JSON or names, like kubectl get",
		Long: `Show objects. KIND is a plural, singular, Kind or short name, optionally
with its group (resourceclaims.resource.k8s.io). Tables come from the server;
-o wide adds the extra columns, -A lists every namespace with a NAMESPACE
column, -w keeps printing rows as objects change.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.cf.open(cmd)
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), s, args)
		},
	}
	o.cf.add(cmd)
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list objects of every namespace")
	f.StringVarP(&o.output, "output", "o", "", "output format: wide, yaml, json or name")
	f.StringVarP(&o.labelSelector, "selector", "l", "", "label selector, such as app=web,tier!=db")
	f.StringVar(&o.fieldSelector, "field-selector", "", "field selector, such as spec.nodeName=node-1")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print rows as objects change")
	f.BoolVar(&o.noHeaders, "no-headers", false, "do not print the header row")
	f.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column")
	f.BoolVar(&o.showManaged, "show-managed-fields", false, "keep metadata.managedFields in -o yaml and json output")
	return cmd
}

func (o *getOptions) run(ctx context.Context, s *session, args []string) error {
	switch o.output {
	case "", "wide", "yaml", "json", "name":
	default:
		return fmt.Errorf("unknown output format %q (use wide, yaml, json or name)", o.output)
	}
	reqs, err := parseGetArgs(ctx, s, args)
	if err != nil {
		return err
	}
	if o.watch {
		if len(reqs) != 1 || (o.output != "" && o.output != "wide") {
			return errors.New("-w watches one kind and prints a table")
		}
		return o.watchTable(ctx, s, reqs[0])
	}
	if o.output == "" || o.output == "wide" {
		return o.printTables(ctx, s, reqs)
	}
	return o.printObjects(ctx, s, reqs)
}

// parseGetArgs reads "KIND[,KIND] NAME..." or "KIND/NAME...".
func parseGetArgs(ctx context.Context, s *session, args []string) ([]getRequest, error) {
	var reqs []getRequest
	if strings.Contains(args[0], "/") {
		byKind := map[string]int{}
		for _, a := range args {
			kind, name, ok := strings.Cut(a, "/")
			if !ok || kind == "" || name == "" {
				return nil, fmt.Errorf("%q: mix KIND/NAME arguments with nothing else", a)
			}
			i, seen := byKind[kind]
			if !seen {
				m, err := s.kinds.resolve(ctx, kind)
				if err != nil {
					return nil, err
				}
				i = len(reqs)
				byKind[kind] = i
				reqs = append(reqs, getRequest{mapping: m})
			}
			reqs[i].names = append(reqs[i].names, name)
		}
		return reqs, nil
	}
	kinds := strings.Split(args[0], ",")
	if len(kinds) > 1 && len(args) > 1 {
		return nil, errors.New("names go with one kind; use KIND/NAME to name objects of several kinds")
	}
	for _, k := range kinds {
		m, err := s.kinds.resolve(ctx, k)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, getRequest{mapping: m, names: args[1:]})
	}
	return reqs, nil
}

func (o *getOptions) query(s *session, m *meta.RESTMapping) listQuery {
	q := listQuery{labelSelector: o.labelSelector, fieldSelector: o.fieldSelector}
	if namespaced(m) && !o.allNamespaces {
		q.ns = s.ns
	}
	return q
}

func (o *getOptions) view(m *meta.RESTMapping, several bool) tableView {
	v := tableView{wide: o.output == "wide", namespace: o.allNamespaces && namespaced(m), labels: o.showLabels}
	if several {
		v.kindName = qualifiedKind(m)
	}
	return v
}

// printTables prints one table per kind, separated by blank lines.
func (o *getOptions) printTables(ctx context.Context, s *session, reqs []getRequest) error {
	var failed error
	printed := 0
	for _, r := range reqs {
		t, err := o.tableFor(ctx, s, r)
		if err != nil {
			failed = err
		}
		if t == nil || len(t.Rows) == 0 {
			continue
		}
		if printed > 0 {
			fmt.Fprintln(s.out)
		}
		printed++
		v := o.view(r.mapping, len(reqs) > 1)
		rows := v.rows(t)
		if !o.noHeaders {
			rows = append([][]string{v.header(t)}, rows...)
		}
		(&aligner{w: s.out}).print(rows)
	}
	if printed == 0 && failed == nil {
		o.noneFound(s, reqs)
	}
	return failed
}

// tableFor fetches the table of one request; with names, the rows of each
// found object, reporting the missing ones.
func (o *getOptions) tableFor(ctx context.Context, s *session, r getRequest) (*metav1.Table, error) {
	q := o.query(s, r.mapping)
	if len(r.names) == 0 {
		return s.getTable(ctx, r.mapping, q, "")
	}
	var merged *metav1.Table
	var failed error
	for _, name := range r.names {
		t, err := s.getTable(ctx, r.mapping, q, name)
		if err != nil {
			failed = err
			if len(r.names) > 1 {
				s.warnf("%v", err)
			}
			continue
		}
		if merged == nil {
			merged = t
		} else {
			merged.Rows = append(merged.Rows, t.Rows...)
		}
	}
	if failed != nil && len(r.names) > 1 {
		failed = errors.New("some objects were not found")
	}
	return merged, failed
}

func (o *getOptions) noneFound(s *session, reqs []getRequest) {
	for _, r := range reqs {
		if len(r.names) > 0 {
			return
		}
	}
	if o.allNamespaces || !namespaced(reqs[0].mapping) {
		fmt.Fprintln(s.errOut, "No resources found")
		return
	}
	fmt.Fprintf(s.errOut, "No resources found in %s namespace.\n", s.ns)
}

// printObjects prints -o yaml, json or name.
func (o *getOptions) printObjects(ctx context.Context, s *session, reqs []getRequest) error {
	items := []any{} // an empty list prints "items": [], as the API and kubectl do
	var failed error
	for _, r := range reqs {
		got, err := o.objectsFor(ctx, s, r)
		if err != nil {
			failed = err
		}
		for _, it := range got {
			if o.output == "name" {
				fmt.Fprintln(s.out, kindName(r.mapping, it.GetName()))
			}
			if !o.showManaged {
				it.SetManagedFields(nil)
			}
			items = append(items, it.Object)
		}
	}
	if o.output == "name" {
		return failed
	}
	var out any = map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items}
	if len(reqs) == 1 && len(reqs[0].names) == 1 && len(items) == 1 {
		out = items[0]
	}
	if len(items) == 0 && failed != nil {
		return failed
	}
	if err := printStructured(s, o.output, out); err != nil {
		return err
	}
	return failed
}

func (o *getOptions) objectsFor(ctx context.Context, s *session, r getRequest) ([]unstructured.Unstructured, error) {
	q := o.query(s, r.mapping)
	res := s.resource(r.mapping, q.ns)
	if len(r.names) == 0 {
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: q.labelSelector, FieldSelector: q.fieldSelector})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	var out []unstructured.Unstructured
	var failed error
	for _, name := range r.names {
		obj, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			failed = err
			if len(r.names) > 1 {
				s.warnf("%v", err)
			}
			continue
		}
		out = append(out, *obj)
	}
	if failed != nil && len(r.names) > 1 {
		failed = errors.New("some objects were not found")
	}
	return out, failed
}

// printStructured prints an object as YAML or indented JSON.
func printStructured(s *session, format string, v any) error {
	var data []byte
	var err error
	if format == "json" {
		data, err = json.MarshalIndent(v, "", "    ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	_, err = s.out.Write(data)
	return err
}
