package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"allot.dev/allot/api/scheme"
)

// lastAppliedAnnotation holds the configuration that was last applied, as
// kubectl keeps it, so that `kubectl apply` and `allot apply` can be mixed.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// crdServedTimeout bounds the wait for a CRD applied in the same
// invocation to be served.
const crdServedTimeout = 30 * time.Second

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

func newApplyCommand() *cobra.Command {
	var cf clientFlags
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests, like kubectl apply",
		Long: `Create or update the objects of YAML or JSON manifests (several documents
per file, directories, or - for stdin). Every document is decoded strictly
before anything is sent. Objects are updated with a three-way merge against
the kubectl.kubernetes.io/last-applied-configuration annotation, exactly as
kubectl apply keeps it, so both tools can manage the same objects.
Namespaces and CustomResourceDefinitions are applied first, and the kinds of
new CRDs are waited for before their objects are applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("apply needs -f FILE, DIR or -")
			}
			s, err := cf.open(cmd)
			if err != nil {
				return err
			}
			return runApply(cmd.Context(), s, files, cmd.InOrStdin())
		},
	}
	cf.add(cmd)
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory, or - for stdin (repeatable)")
	return cmd
}

func runApply(ctx context.Context, s *session, files []string, stdin io.Reader) error {
	ms, errs := readManifests(files, stdin)
	if len(errs) > 0 {
		for _, err := range errs[:len(errs)-1] {
			s.warnf("%v", err)
		}
		return fmt.Errorf("%w (nothing was applied)", errs[len(errs)-1])
	}
	applyOrder(ms)
	failed := 0
	for _, m := range ms {
		result, err := applyOne(ctx, s, m)
		if err != nil {
			failed++
			s.warnf("%v", err)
			continue
		}
		fmt.Fprintln(s.out, result)
		if m.gvk.GroupKind() == crdGroupKind {
			if err := waitCRDServed(ctx, s, m.obj); err != nil {
				s.warnf("%s: %v", m.where(), err)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects failed", failed, len(ms))
	}
	return nil
}

// applyOne creates or patches one object and says which it did.
func applyOne(ctx context.Context, s *session, m manifest) (string, error) {
	mapping, err := s.kinds.forKind(ctx, m.gvk)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.where(), err)
	}
	obj := m.obj.DeepCopy()
	ns, err := s.objectNamespace(mapping, obj)
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.where(), err)
	}
	name := kindName(mapping, obj.GetName())
	failed := func(verb string, err error) error {
		return fmt.Errorf("%s %s (%s): %w", verb, name, m.where(), err)
	}
	modified, err := withLastApplied(obj)
	if err != nil {
		return "", failed("encode", err)
	}
	res := s.resource(mapping, ns)
	cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
			return "", failed("create", err)
		}
		return name + " created", nil
	}
	if err != nil {
		return "", failed("read", err)
	}
	patch, pt, err := threeWayPatch(m.gvk, cur, modified)
	if err != nil {
		return "", failed("compute patch for", err)
	}
	if string(patch) == "{}" {
		return name + " unchanged", nil
	}
	_, err = res.Patch(ctx, obj.GetName(), pt, patch, metav1.PatchOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		return "", failed("patch", err)
	}
	return name + " configured", nil
}

// objectNamespace settles the object's namespace: its own, else the
// session's; -n that disagrees with the manifest is an error, as in kubectl.
func (s *session) objectNamespace(mapping *meta.RESTMapping, obj *unstructured.Unstructured) (string, error) {
	if !namespaced(mapping) {
		obj.SetNamespace("")
		return "", nil
	}
	ns := obj.GetNamespace()
	switch {
	case ns == "":
		obj.SetNamespace(s.ns)
		return s.ns, nil
	case s.nsSet && ns != s.ns:
		return "", fmt.Errorf("the namespace from the object (%q) does not match the namespace %q given with -n", ns, s.ns)
	}
	return ns, nil
}

// withLastApplied sets the last-applied annotation of obj to obj itself
// without that annotation, encoded as kubectl encodes it, and returns the
// annotated object's JSON (the "modified" side of the three-way merge).
func withLastApplied(obj *unstructured.Unstructured) ([]byte, error) {
	annots := obj.GetAnnotations()
	if annots == nil {
		annots = map[string]string{}
	}
	delete(annots, lastAppliedAnnotation)
	obj.SetAnnotations(annots)
	applied, err := encodeLikeKubectl(obj.Object)
	if err != nil {
		return nil, err
	}
	annots[lastAppliedAnnotation] = string(applied)
	obj.SetAnnotations(annots)
	return encodeLikeKubectl(obj.Object)
}

// encodeLikeKubectl is unstructured.UnstructuredJSONScheme's encoding:
// sorted keys, HTML-escaped, with a trailing newline.
func encodeLikeKubectl(v map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	return buf.Bytes(), nil
}

// threeWayPatch computes the patch from the live object to the modified
// configuration that also deletes what the last applied configuration had
// and the new one drops. Like kubectl, built-in kinds get a strategic merge
// patch (lists such as containers merge by name, so server defaults inside
// them survive and an unchanged manifest yields an empty patch); custom
// resources get a JSON merge patch.
func threeWayPatch(gvk schema.GroupVersionKind, cur *unstructured.Unstructured, modified []byte) ([]byte, types.PatchType, error) {
	original := []byte(cur.GetAnnotations()[lastAppliedAnnotation])
	current, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, "", fmt.Errorf("encode live object: %w", err)
	}
	if typed, err := scheme.Scheme.New(gvk); err == nil {
		meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
		if err != nil {
			return nil, "", fmt.Errorf("read patch metadata of %s: %w", gvk.Kind, err)
		}
		patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, meta, true)
		return patch, types.StrategicMergePatchType, err
	}
	preconditions := []mergepatch.PreconditionFunc{
		mergepatch.RequireKeyUnchanged("apiVersion"),
		mergepatch.RequireKeyUnchanged("kind"),
		mergepatch.RequireMetadataKeyUnchanged("name"),
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(original, modified, current, preconditions...)
	return patch, types.MergePatchType, err
}

// waitCRDServed waits until the kind of an applied CRD is served, in each
// of its served versions.
func waitCRDServed(ctx context.Context, s *session, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		name, _ := vm["name"].(string)
		if served, _ := vm["served"].(bool); !served || name == "" {
			continue
		}
		gvk := schema.GroupVersionKind{Group: group, Version: name, Kind: kind}
		if err := s.kinds.waitServed(ctx, gvk, crdServedTimeout); err != nil {
			return err
		}
	}
	return nil
}
