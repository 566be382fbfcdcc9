package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectMeta(t *testing.T) {
	for name, tc := range map[string]struct {
		meta func(*metav1.ObjectMeta)
		want []string
	}{
		"valid":                        {meta: func(*metav1.ObjectMeta) {}},
		"name required":                {meta: func(m *metav1.ObjectMeta) { m.Name = "" }, want: []string{"metadata.name: name or generateName is required"}},
		"generateName instead of name": {meta: func(m *metav1.ObjectMeta) { m.Name, m.GenerateName = "", "web-" }},
		"generateName invalid":         {meta: func(m *metav1.ObjectMeta) { m.Name, m.GenerateName = "", "Web-" }, want: []string{"metadata.generateName"}},
		"name not a DNS subdomain":     {meta: func(m *metav1.ObjectMeta) { m.Name = "My_Pod" }, want: []string{"metadata.name: RFC 1123 subdomain"}},
		"dotted name is a subdomain":   {meta: func(m *metav1.ObjectMeta) { m.Name = "a.b" }},
		"namespace format":             {meta: func(m *metav1.ObjectMeta) { m.Namespace = "a.b" }, want: []string{"metadata.namespace"}},
		"namespace may be empty":       {meta: func(m *metav1.ObjectMeta) { m.Namespace = "" }},
		"label key invalid":            {meta: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a b": "x"} }, want: []string{"metadata.labels"}},
		"label value invalid":          {meta: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"app": "a b"} }, want: []string{"metadata.labels"}},
		"annotation key invalid":       {meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"a b": "x"} }, want: []string{"metadata.annotations"}},
		"annotations above 256 KiB":    {meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"a": strings.Repeat("x", 256<<10)} }, want: []string{"metadata.annotations: Too long"}},
		"annotations at 256 KiB":       {meta: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"a": strings.Repeat("x", 256<<10-1)} }},
		"finalizer qualified name":     {meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"example.com/protect"} }},
		"finalizer not qualified":      {meta: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"a/b/c"} }, want: []string{"metadata.finalizers"}},
		"owner reference complete":     {meta: func(m *metav1.ObjectMeta) { m.OwnerReferences = []metav1.OwnerReference{owner()} }},
		"owner reference without uid":  {meta: func(m *metav1.ObjectMeta) { o := owner(); o.UID = ""; m.OwnerReferences = []metav1.OwnerReference{o} }, want: []string{"metadata.ownerReferences[0].uid"}},
		"owner reference without kind": {meta: func(m *metav1.ObjectMeta) { o := owner(); o.Kind = ""; m.OwnerReferences = []metav1.OwnerReference{o} }, want: []string{"metadata.ownerReferences[0].kind"}},
		"owner reference without name": {meta: func(m *metav1.ObjectMeta) { o := owner(); o.Name = ""; m.OwnerReferences = []metav1.OwnerReference{o} }, want: []string{"metadata.ownerReferences[0].name"}},
		"owner reference without group": {meta: func(m *metav1.ObjectMeta) {
			o := owner()
			o.APIVersion = ""
			m.OwnerReferences = []metav1.OwnerReference{o}
		}, want: []string{"metadata.ownerReferences[0].apiVersion"}},
		"negative generation": {meta: func(m *metav1.ObjectMeta) { m.Generation = -1 }, want: []string{"metadata.generation"}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := makePod("web").with(func(p *corev1.Pod) { tc.meta(&p.ObjectMeta) }).obj()
			expectErrs(t, ValidatePod(pod), tc.want...)
		})
	}
}

func owner() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "worker-1", UID: "u1"}
}

func TestObjectMetaUpdate(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	old := func() *corev1.Pod {
		return makePod("web").with(func(p *corev1.Pod) {
			p.UID, p.ResourceVersion, p.CreationTimestamp, p.Generation = "u1", "5", now, 2
		}).obj()
	}
	for name, tc := range map[string]struct {
		change func(*metav1.ObjectMeta)
		old    func(*metav1.ObjectMeta)
		want   []string
	}{
		"labels may change":          {change: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} }},
		"name immutable":             {change: func(m *metav1.ObjectMeta) { m.Name = "other" }, want: []string{"metadata.name: field is immutable"}},
		"namespace immutable":        {change: func(m *metav1.ObjectMeta) { m.Namespace = "other" }, want: []string{"metadata.namespace: field is immutable"}},
		"uid immutable":              {change: func(m *metav1.ObjectMeta) { m.UID = "u2" }, want: []string{"metadata.uid: field is immutable"}},
		"creationTimestamp":          {change: func(m *metav1.ObjectMeta) { m.CreationTimestamp = metav1.NewTime(time.Unix(2000, 0)) }, want: []string{"metadata.creationTimestamp: field is immutable"}},
		"deletionTimestamp":          {change: func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }, want: []string{"metadata.deletionTimestamp"}},
		"generation decremented":     {change: func(m *metav1.ObjectMeta) { m.Generation = 1 }, want: []string{"metadata.generation: must not be decremented"}},
		"finalizer removed deleting": {old: deleting("a.com/x"), change: func(m *metav1.ObjectMeta) { m.Finalizers = nil }},
		"finalizer added deleting":   {old: deleting(), change: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"a.com/x"} }, want: []string{"metadata.finalizers[0]: may not be added"}},
	} {
		t.Run(name, func(t *testing.T) {
			o := old()
			if tc.old != nil {
				tc.old(&o.ObjectMeta)
			}
			n := o.DeepCopy()
			tc.change(&n.ObjectMeta)
			expectErrs(t, ValidatePodUpdate(n, o), tc.want...)
		})
	}
}

func deleting(finalizers ...string) func(*metav1.ObjectMeta) {
	return func(m *metav1.ObjectMeta) {
		ts := metav1.NewTime(time.Unix(3000, 0))
		m.DeletionTimestamp, m.Finalizers = &ts, finalizers
	}
}
