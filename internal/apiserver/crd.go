package apiserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"allot.dev/allot/api/validation"
	"allot.dev/allot/internal/storage"
)

// prepareCRD fills the names' defaults and marks the CRD established: the
// server serves its kind as soon as it is stored.
func prepareCRD(obj runtime.Object) {
	crd := obj.(*apiextv1.CustomResourceDefinition)
	n := &crd.Spec.Names
	if n.Singular == "" {
		n.Singular = strings.ToLower(n.Kind)
	}
	if n.ListKind == "" && n.Kind != "" {
		n.ListKind = n.Kind + "List"
	}
	now := metav1.Now()
	crd.Status = apiextv1.CustomResourceDefinitionStatus{
		AcceptedNames: *n,
		Conditions: []apiextv1.CustomResourceDefinitionCondition{
			{Type: "NamesAccepted", Status: "True", Reason: "NoConflicts", LastTransitionTime: now},
			{Type: "Established", Status: "True", Reason: "InitialNamesAccepted", LastTransitionTime: now},
		},
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = []string{v.Name}
		}
	}
}

// crdKinds builds the served kinds of a CRD, one per served version.
func crdKinds(crd *apiextv1.CustomResourceDefinition) []*kind {
	var out []*kind
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		var sch *apiextv1.JSONSchemaProps
		if v.Schema != nil {
			sch = v.Schema.OpenAPIV3Schema
		}
		k := &kind{
			gvk:        schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.WithKind(crd.Spec.Names.Kind),
			resource:   crd.Spec.Names.Plural,
			singular:   crd.Spec.Names.Singular,
			shortNames: crd.Spec.Names.ShortNames,
			categories: crd.Spec.Names.Categories,
			namespaced: crd.Spec.Scope == apiextv1.NamespaceScoped,
			hasStatus:  v.Subresources != nil && v.Subresources.Status != nil,
			onCreate:   dropStatusOnCreate,
			newObj:     func() runtime.Object { return &unstructured.Unstructured{Object: map[string]any{}} },
			crd:        crd,
			schema:     sch,
		}
		finishCustom(k, v.AdditionalPrinterColumns)
		out = append(out, k)
	}
	return out
}

func finishCustom(k *kind, printer []apiextv1.CustomResourceColumnDefinition) {
	sch := k.schema
	hasStatus := k.hasStatus
	k.prepareCreate = func(obj runtime.Object) {
		if sch != nil {
			validation.DefaultCustomResource(sch, obj.(*unstructured.Unstructured).Object)
		}
	}
	k.prepareUpdate = func(obj, old runtime.Object) {
		if hasStatus {
			keepStatus(obj, old)
		}
		if sch != nil {
			validation.DefaultCustomResource(sch, obj.(*unstructured.Unstructured).Object)
		}
	}
	k.validate = func(obj runtime.Object) field.ErrorList {
		if sch == nil {
			return nil
		}
		return validation.ValidateCustomResource(sch, obj.(*unstructured.Unstructured).Object)
	}
	k.validateUpd = func(obj, _ runtime.Object) field.ErrorList { return k.validate(obj) }
	k.validateStat = k.validateUpd
	k.columns = append([]column{nameCol}, ageCol)
	type printerCol struct {
		col column
		jp  *jsonpath.JSONPath
	}
	var extra []printerCol
	for _, c := range printer {
		jp := jsonpath.New(c.Name).AllowMissingKeys(true)
		if err := jp.Parse("{" + c.JSONPath + "}"); err != nil {
			continue
		}
		extra = append(extra, printerCol{column{name: c.Name, typ: c.Type, priority: c.Priority, format: c.Format}, jp})
		k.columns = append(k.columns, extra[len(extra)-1].col)
	}
	k.row = func(obj runtime.Object) []any {
		u := obj.(*unstructured.Unstructured)
		cells := []any{u.GetName(), age(u)}
		for _, pc := range extra {
			var b strings.Builder
			if err := pc.jp.Execute(&b, u.Object); err != nil {
				cells = append(cells, "<error>")
				continue
			}
			cells = append(cells, b.String())
		}
		return cells
	}
}

func (s *Server) crdKind() *kind {
	return s.reg.get(gvrOf(apiextv1.SchemeGroupVersion, "customresourcedefinitions"))
}

// loadCRDs serves the kinds of every stored CRD.
func (s *Server) loadCRDs(ctx context.Context) error {
	items, _, err := s.listFromCache(ctx, s.crdKind(), "", "0", nil)
	if err != nil {
		return fmt.Errorf("list CRDs: %w", err)
	}
	for _, it := range items {
		obj, err := decodeStored(s.crdKind(), it.value, it.rev)
		if err != nil {
			return err
		}
		if err := s.serveCRD(ctx, obj.(*apiextv1.CustomResourceDefinition)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) serveCRD(ctx context.Context, crd *apiextv1.CustomResourceDefinition) error {
	for _, k := range crdKinds(crd) {
		if err := s.startCache(ctx, k); err != nil {
			return err
		}
		s.reg.add(k)
	}
	return nil
}

// followCRDs adds and removes served kinds as CRDs change. Deleting a CRD
// deletes its custom resources.
func (s *Server) followCRDs(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := s.cacheFor(s.crdKind())
		if err != nil {
			return
		}
		events, err := c.Watch(ctx, s.crdKind().prefix(), c.Revision(), nil)
		if err != nil {
			s.log.Error("watch CRDs", "err", err)
			time.Sleep(time.Second)
			continue
		}
		for ev := range events {
			s.applyCRDEvent(ctx, ev)
		}
	}
}

func (s *Server) applyCRDEvent(ctx context.Context, ev storage.CacheEvent) {
	if ev.Type != storage.Added && ev.Type != storage.Modified && ev.Type != storage.Deleted {
		return // bookmarks carry no object
	}
	obj, err := decodeStored(s.crdKind(), ev.Object.KV.Value, ev.Object.KV.ModRevision)
	if err != nil {
		s.log.Error("decode CRD", "err", err)
		return
	}
	crd := obj.(*apiextv1.CustomResourceDefinition)
	switch ev.Type {
	case storage.Added, storage.Modified:
		// The new versions replace the old in place, and only then are
		// versions no longer served removed: a kind the CRD still serves is
		// never missing from the registry, not even for a moment (its
		// custom resources would get 404s).
		if err := s.serveCRD(ctx, crd); err != nil {
			s.log.Error("serve CRD", "crd", crd.Name, "err", err)
			return
		}
		served := map[schema.GroupVersionResource]bool{}
		for _, k := range crdKinds(crd) {
			served[k.gvk.GroupVersion().WithResource(k.resource)] = true
		}
		for _, k := range s.reg.all() {
			if gvr := k.gvk.GroupVersion().WithResource(k.resource); k.crd != nil && k.crd.Name == crd.Name && !served[gvr] {
				s.reg.remove(gvr)
			}
		}
	case storage.Deleted:
		var prefix string
		for _, k := range s.reg.all() {
			if k.crd != nil && k.crd.Name == crd.Name {
				prefix = k.prefix()
				s.reg.remove(k.gvk.GroupVersion().WithResource(k.resource))
			}
		}
		if prefix != "" {
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if _, err := s.store.Client().Delete(dctx, prefix, clientv3.WithPrefix()); err != nil {
				s.log.Error("delete custom resources", "crd", crd.Name, "err", err)
			}
		}
	}
}
