package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// describer writes the kind-specific body of a description, after the
// common metadata. Kinds without one get describeGeneric.
type describer func(w *describeWriter, u *unstructured.Unstructured) error

// describers maps kinds to their describers; add a kind here.
var describers = map[schema.GroupKind]describer{
	{Kind: "Pod"}:  describePod,
	{Kind: "Node"}: describeNode,
	{Group: "resource.k8s.io", Kind: "ResourceClaim"}: describeClaimAnyVersion,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}: describeResourceSlice,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:   describeDeviceClass,
}

// describeClaimAnyVersion describes claims of either version field by
// field: v1alpha2 ones with describeClaim, resource.k8s.io/v1 ones with
// describeClaimV1, and others generically.
func describeClaimAnyVersion(w *describeWriter, u *unstructured.Unstructured) error {
	switch u.GetAPIVersion() {
	case resourcev1alpha2.SchemeGroupVersion.String():
		return describeClaim(w, u)
	case resourcev1.SchemeGroupVersion.String():
		return describeClaimV1(w, u)
	}
	return describeGeneric(w, u)
}

func newDescribeCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "describe KIND NAME... | describe KIND/NAME...",
		Short: "Show an object in detail, with its events",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := cf.open(cmd)
			if err != nil {
				return err
			}
			reqs, err := parseGetArgs(cmd.Context(), s, args)
			if err != nil {
				return err
			}
			for i, r := range reqs {
				if len(r.names) == 0 {
					return fmt.Errorf("describe needs names of %s", r.mapping.Resource.Resource)
				}
				for j, name := range r.names {
					if i+j > 0 {
						fmt.Fprintln(s.out)
					}
					if err := describeOne(cmd.Context(), s, r.mapping, name); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}

func describeOne(ctx context.Context, s *session, m *meta.RESTMapping, name string) error {
	ns := ""
	if namespaced(m) {
		ns = s.ns
	}
	u, err := s.resource(m, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if stored, ok := u.GetAnnotations()[resourcev1alpha2.StoredVersionAnnotation]; ok {
		// A view of an object stored in another version (a v1alpha2
		// claim read through v1): describe the object as written.
		if gv, err := schema.ParseGroupVersion(stored); err == nil {
			sm := *m
			sm.GroupVersionKind = gv.WithKind(m.GroupVersionKind.Kind)
			sm.Resource = gv.WithResource(m.Resource.Resource)
			if su, err := s.resource(&sm, ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				m, u = &sm, su
			}
		}
	}
	w := newDescribeWriter(s.out)
	describeMeta(w, u)
	d, ok := describers[m.GroupVersionKind.GroupKind()]
	if !ok {
		d = describeGeneric
	}
	if err := d(w, u); err != nil {
		return fmt.Errorf("describe %s: %w", kindName(m, name), err)
	}
	if m.GroupVersionKind.GroupKind() == (schema.GroupKind{Kind: "Pod"}) {
		describePodDRA(ctx, s, w, u)
	}
	events, err := eventsFor(ctx, s, u)
	if err != nil {
		w.line(0, "Events:\t<cannot list: %v>", err)
	} else {
		describeEvents(w, events)
	}
	return w.flush()
}

// describeWriter writes "Key:\tvalue" lines at indentation levels, aligned
// per block by a tab writer.
type describeWriter struct {
	tw *tabwriter.Writer
}

func newDescribeWriter(out io.Writer) *describeWriter {
	return &describeWriter{tw: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
}

func (w *describeWriter) line(level int, format string, args ...any) {
	fmt.Fprintf(w.tw, strings.Repeat("  ", level)+format+"\n", args...)
}

func (w *describeWriter) flush() error { return w.tw.Flush() }

func describeMeta(w *describeWriter, u *unstructured.Unstructured) {
	w.line(0, "Name:\t%s", u.GetName())
	if u.GetNamespace() != "" {
		w.line(0, "Namespace:\t%s", u.GetNamespace())
	}
	w.line(0, "Kind:\t%s", u.GetKind())
	w.line(0, "API Version:\t%s", u.GetAPIVersion())
	describeMap(w, "Labels", u.GetLabels(), "=")
	annots := u.GetAnnotations()
	delete(annots, lastAppliedAnnotation)
	describeMap(w, "Annotations", annots, ": ")
	w.line(0, "Created:\t%s (%s ago)", u.GetCreationTimestamp().UTC().Format(time.RFC3339), since(u.GetCreationTimestamp()))
	if ts := u.GetDeletionTimestamp(); ts != nil {
		w.line(0, "Deleting Since:\t%s", ts.UTC().Format(time.RFC3339))
	}
	if f := u.GetFinalizers(); len(f) > 0 {
		w.line(0, "Finalizers:\t%s", strings.Join(f, ", "))
	}
	for i, o := range u.GetOwnerReferences() {
		label := "Controlled By:"
		if i > 0 || o.Controller == nil || !*o.Controller {
			label = "Owned By:"
		}
		w.line(0, "%s\t%s/%s", label, o.Kind, o.Name)
	}
}

// describeMap prints a sorted map, one entry per line, or <none>.
func describeMap(w *describeWriter, title string, m map[string]string, sep string) {
	if len(m) == 0 {
		w.line(0, "%s:\t<none>", title)
		return
	}
	for i, k := range sortedKeys(m) {
		label := title + ":"
		if i > 0 {
			label = ""
		}
		w.line(0, "%s\t%s%s%s", label, k, sep, m[k])
	}
}

// describeGeneric renders every top-level field but apiVersion, kind and
// metadata as an indented section.
func describeGeneric(w *describeWriter, u *unstructured.Unstructured) error {
	keys := make([]string, 0, len(u.Object))
	for k := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return sectionRank(keys[i]) < sectionRank(keys[j]) || (sectionRank(keys[i]) == sectionRank(keys[j]) && keys[i] < keys[j])
	})
	for _, k := range keys {
		describeValue(w, 0, titleCase(k), u.Object[k])
	}
	return nil
}

// sectionRank puts spec before status and other fields before both.
func sectionRank(k string) int {
	switch k {
	case "spec":
		return 1
	case "status":
		return 2
	}
	return 0
}

// describeValue renders any JSON value: scalars inline, maps and lists as
// indented sections, list items YAML-style with "- ".
func describeValue(w *describeWriter, level int, key string, v any) {
	describeEntry(w, level, "", key, v)
}

// describeEntry renders "key: v" at level, with prefix ("- " for the first
// key of a list item, "  " for its other keys) before the key.
func describeEntry(w *describeWriter, level int, prefix, key string, v any) {
	child := level + 1
	if prefix != "" {
		child++
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			w.line(level, "%s%s:\t<none>", prefix, key)
			return
		}
		w.line(level, "%s%s:", prefix, key)
		for _, k := range sortedKeys(x) {
			describeEntry(w, child, "", titleCase(k), x[k])
		}
	case []any:
		if len(x) == 0 {
			w.line(level, "%s%s:\t<none>", prefix, key)
			return
		}
		w.line(level, "%s%s:", prefix, key)
		for _, it := range x {
			m, ok := it.(map[string]any)
			if !ok || len(m) == 0 {
				w.line(child, "- %s", scalar(it))
				continue
			}
			for i, k := range sortedKeys(m) {
				p := "  "
				if i == 0 {
					p = "- "
				}
				describeEntry(w, child, p, titleCase(k), m[k])
			}
		}
	default:
		w.line(level, "%s%s:\t%s", prefix, key, scalar(x))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func scalar(v any) string {
	if v == nil {
		return "<none>"
	}
	return formatCell(v)
}

// titleCase turns a JSON field name into a label: resourceClassName ->
// Resource Class Name.
func titleCase(k string) string {
	if k == "-" || k == "" {
		return k
	}
	var b strings.Builder
	for i, r := range k {
		if i > 0 && r >= 'A' && r <= 'Z' && !(k[i-1] >= 'A' && k[i-1] <= 'Z') {
			b.WriteByte(' ')
		}
		if i == 0 && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func since(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// eventsFor lists the events about an object, oldest first.
func eventsFor(ctx context.Context, s *session, u *unstructured.Unstructured) ([]corev1.Event, error) {
	sel := "involvedObject.name=" + u.GetName() + ",involvedObject.namespace=" + u.GetNamespace()
	list, err := s.c.Events(u.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind != "" && e.InvolvedObject.Kind != u.GetKind() {
			continue
		}
		if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != string(u.GetUID()) {
			continue
		}
		out = append(out, e)
	}
	sortEvents(out)
	return out, nil
}

// sortEvents puts events in the order they happened. An Event's
// timestamps have whole seconds (eventTime, which some recorders set
// instead, has microseconds and is cut to seconds here so that the two
// compare alike), and components stamp an event when they get to
// recording it: the scheduler records Scheduled after its binding
// returned, by when the node may already have recorded that the bound
// pod waits for its claims. So within one second, events go by the
// version of the object each reporter saw (involvedObject.resourceVersion:
// Scheduled names the pod before its binding, the node's events the bound
// pod), then by first occurrence, then as listed.
func sortEvents(events []corev1.Event) {
	sort.SliceStable(events, func(i, j int) bool {
		a, b := eventTime(events[i]).Truncate(time.Second), eventTime(events[j]).Truncate(time.Second)
		if !a.Equal(b) {
			return a.Before(b)
		}
		if ra, rb := objectVersion(events[i]), objectVersion(events[j]); ra != rb {
			return ra < rb
		}
		return events[i].FirstTimestamp.Before(&events[j].FirstTimestamp)
	})
}

// objectVersion is the resourceVersion of the involved object an event
// names (allot's are etcd revisions), or 0 when it names none.
func objectVersion(e corev1.Event) uint64 {
	v, err := strconv.ParseUint(e.InvolvedObject.ResourceVersion, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func describeEvents(w *describeWriter, events []corev1.Event) {
	if len(events) == 0 {
		w.line(0, "Events:\t<none>")
		return
	}
	w.line(0, "Events:")
	w.line(1, "Type\tReason\tAge\tFrom\tMessage")
	w.line(1, "----\t------\t----\t----\t-------")
	for _, e := range events {
		age := duration.HumanDuration(time.Since(eventTime(e)))
		if e.Count > 1 && !e.FirstTimestamp.IsZero() {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, duration.HumanDuration(time.Since(e.FirstTimestamp.Time)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		w.line(1, "%s\t%s\t%s\t%s\t%s", e.Type, e.Reason, age, from, strings.TrimSpace(e.Message))
	}
}
