package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"allot.dev/allot/api/validation"
)

// Field ownership (metadata.managedFields) and server-side apply use
// Kubernetes' own field manager (k8s.io/apimachinery's managedfields over
// structured-merge-diff). Its type converter is built from the same
// schemas the OpenAPI documents serve (openapi_schema.go with the list
// markers of openapi_markers.go; a CRD's from its structural schema), as
// kube-apiserver builds its own from its OpenAPI models.
//
// Every create, update and patch records its manager's fields (the
// fieldManager parameter, else the User-Agent's product, as Kubernetes
// names it); apply (apply.go) merges by ownership. A kind has one field
// manager for the main resource and one for status: each ignores the
// fields the other writes (resetFields), as Kubernetes' strategies do.

// fieldManagers holds a kind's field managers, built on first use.
type fieldManagers struct {
	once         sync.Once
	main, status *managedfields.FieldManager
	err          error
	// creates remembers the main field manager's answers for creates
	// by shape (fieldmanager_memo.go).
	creates createMemo
	// updates remembers both field managers' answers for updates
	// (fieldmanager_updmemo.go) of a built-in kind, whose schema walk
	// is; nil for a custom resource.
	updates updateMemo
	walk    *updateWalk
}

var builtinTC struct {
	once sync.Once
	tc   managedfields.TypeConverter
	err  error
}

// builtinTypeConverter knows every built-in kind; their types never
// change, so it is built once per process.
func builtinTypeConverter() (managedfields.TypeConverter, error) {
	builtinTC.once.Do(func() {
		b := newSchemaBuilder("#/components/schemas/")
		for _, k := range builtinKinds() {
			kindSchema(b, k)
		}
		builtinTC.tc, builtinTC.err = typeConverterOf(b.defs)
	})
	return builtinTC.tc, builtinTC.err
}

// typeConverterOf turns OpenAPI v3 components into a type converter, as
// managedfields.NewTypeConverter does, but one that trusts objects allot
// has already decoded and validated (see schemaTypeConverter).
func typeConverterOf(defs map[string]map[string]any) (managedfields.TypeConverter, error) {
	raw, err := json.Marshal(defs)
	if err != nil {
		return nil, fmt.Errorf("encode schemas: %w", err)
	}
	var specs map[string]*spec.Schema
	if err := json.Unmarshal(raw, &specs); err != nil {
		return nil, fmt.Errorf("decode schemas: %w", err)
	}
	sch, err := schemaconv.ToSchemaFromOpenAPI(specs, false)
	if err != nil {
		return nil, fmt.Errorf("build type converter: %w", err)
	}
	parser := &typed.Parser{Schema: smdschema.Schema{Types: sch.Types}}
	tc := &schemaTypeConverter{types: map[schema.GroupVersionKind]typed.ParseableType{}}
	for name, def := range defs {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]string)
			if m == nil || m["kind"] == "" {
				continue
			}
			tc.types[schema.GroupVersionKind{Group: m["group"], Version: m["version"], Kind: m["kind"]}] = parser.Type(name)
		}
	}
	return tc, nil
}

// schemaTypeConverter converts objects of the kinds its schemas name.
// The field manager asks for live and updated objects with
// typed.AllowDuplicates: those allot has decoded into the kind's Go type
// (or, for custom resources, validated against the CRD's schema) and
// validated, so they are wrapped without a second validating walk, which
// was half of the field manager's cost per update. An applied
// configuration is validated: unknown fields and duplicate keys are the
// client's errors.
type schemaTypeConverter struct {
	types map[schema.GroupVersionKind]typed.ParseableType
}

func (c *schemaTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	t, ok := c.types[gvk]
	if !ok {
		return nil, fmt.Errorf("no schema of %s", gvk)
	}
	if !slices.Contains(opts, typed.AllowDuplicates) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return t.FromUnstructured(u.Object, opts...)
		}
		return t.FromStructured(obj, opts...)
	}
	var v value.Value
	if u, ok := obj.(*unstructured.Unstructured); ok {
		v = value.NewValueInterface(u.Object)
	} else {
		var err error
		if v, err = value.NewValueReflect(obj); err != nil {
			return nil, fmt.Errorf("reflect %s: %w", gvk.Kind, err)
		}
	}
	return typed.AsTypedUnvalidated(v, t.Schema, t.TypeRef), nil
}

func (c *schemaTypeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	m, ok := v.AsValue().Unstructured().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("convert %T to an object", v.AsValue().Unstructured())
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// fieldManager returns the kind's field manager for the main resource
// (sub "") or its status.
func (k *kind) fieldManager(sub string) (*managedfields.FieldManager, error) {
	fm := k.fm
	if fm == nil {
		return nil, fmt.Errorf("kind %s has no field manager", k.gvk)
	}
	fm.once.Do(func() { fm.main, fm.status, fm.walk, fm.err = newFieldManagers(k) })
	if fm.err != nil {
		return nil, fm.err
	}
	if sub == "status" {
		return fm.status, nil
	}
	return fm.main, nil
}

func newFieldManagers(k *kind) (main, status *managedfields.FieldManager, walk *updateWalk, err error) {
	var tc managedfields.TypeConverter
	if k.crd != nil {
		b := newSchemaBuilder("#/components/schemas/")
		kindSchema(b, k)
		tc, err = typeConverterOf(b.defs)
	} else {
		tc, err = builtinTypeConverter()
		if sc, ok := tc.(*schemaTypeConverter); ok && err == nil {
			if pt, ok := sc.types[k.gvk]; ok && pt.Schema != nil {
				walk = &updateWalk{s: pt.Schema, root: pt.TypeRef}
			}
		}
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", k.gvk, err)
	}
	conv := kindConvertor{k}
	gv := fieldpath.APIVersion(k.gvk.GroupVersion().String())
	var mainReset map[fieldpath.APIVersion]fieldpath.Filter
	if k.hasStatus {
		mainReset = map[fieldpath.APIVersion]fieldpath.Filter{gv: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
	}
	statusReset := map[fieldpath.APIVersion]fieldpath.Filter{gv: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(
		fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec")))}
	build := managedfields.NewDefaultFieldManager
	if k.crd != nil {
		build = managedfields.NewDefaultCRDFieldManager
	}
	hub := k.gvk.GroupVersion()
	if main, err = build(tc, conv, conv, conv, k.gvk, hub, "", mainReset); err != nil {
		return nil, nil, nil, err
	}
	if k.hasStatus {
		if status, err = build(tc, conv, conv, conv, k.gvk, hub, "status", statusReset); err != nil {
			return nil, nil, nil, err
		}
	}
	return main, status, walk, nil
}

// kindConvertor is the field manager's view of one kind's objects: one
// version (no conversions), typed objects for built-in kinds.
type kindConvertor struct{ k *kind }

var (
	_ runtime.ObjectConvertor = kindConvertor{}
	_ runtime.ObjectDefaulter = kindConvertor{}
	_ runtime.ObjectCreater   = kindConvertor{}
)

func (c kindConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("convert %T to %T: not supported", in, out)
}

// ConvertToVersion answers an object of the kind's own version, typed
// for a built-in kind; other versions are not registered.
func (c kindConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{c.k.gvk}); !ok || gvk != c.k.gvk {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("allot", in.GetObjectKind().GroupVersionKind(), target)
	}
	u, isU := in.(*unstructured.Unstructured)
	if !isU {
		in.GetObjectKind().SetGroupVersionKind(c.k.gvk)
		return in, nil
	}
	out := c.k.newObj()
	if _, custom := out.(*unstructured.Unstructured); custom {
		in.GetObjectKind().SetGroupVersionKind(c.k.gvk)
		return in, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("convert to %s: %w", c.k.gvk.Kind, err)
	}
	out.GetObjectKind().SetGroupVersionKind(c.k.gvk)
	return out, nil
}

func (c kindConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// Default fills the defaults of a built-in kind's merged object; create
// and update default it again.
func (c kindConvertor) Default(obj runtime.Object) {
	if _, ok := obj.(*unstructured.Unstructured); !ok {
		validation.Default(obj)
	}
}

func (c kindConvertor) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if gvk != c.k.gvk {
		return nil, runtime.NewNotRegisteredErrForKind("allot", gvk)
	}
	obj := c.k.newObj()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// managerOf names the manager of a write: the fieldManager parameter, or
// the User-Agent's product (before the first "/"), printable characters
// only and at most 128 of them, as kube-apiserver names it.
func managerOf(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(r.UserAgent(), "/")
	var b strings.Builder
	for _, c := range ua {
		if b.Len() >= metav1validation.FieldManagerMaxLength {
			break
		}
		if unicode.IsPrint(c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// checkWriteOptions validates fieldManager and force of a create, update
// or patch as Kubernetes does: 422 on an invalid CreateOptions,
// UpdateOptions or PatchOptions naming the field.
func checkWriteOptions(r *http.Request, verb string, apply bool) error {
	q := r.URL.Query()
	opts := metav1.PatchOptions{FieldManager: q.Get("fieldManager")}
	var errs field.ErrorList
	switch verb {
	case "patch":
		if _, ok := q["force"]; ok {
			f, err := parseForce(q.Get("force"))
			if err != nil {
				return err
			}
			opts.Force = &f
		}
		pt := "application/merge-patch+json"
		if apply {
			pt = applyPatchType
		}
		errs = metav1validation.ValidatePatchOptions(&opts, types.PatchType(pt))
	default:
		errs = metav1validation.ValidateFieldManager(opts.FieldManager, field.NewPath("fieldManager"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKindOf(verb)}, "", errs)
	}
	return nil
}

// parseForce reads the force parameter as kube-apiserver's query
// decoding reads a bool.
func parseForce(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "1":
		return true, nil
	case "false", "0", "":
		return false, nil
	}
	return false, apierrors.NewBadRequest(fmt.Sprintf("force: invalid value %q: must be true or false", v))
}

// trackUpdate records the fields a create, update or non-apply patch by
// manager changed from live (an empty object for a create), in obj's
// metadata.managedFields.
//
// The field manager compares copies of both objects without the parts
// that cannot add a field to its sets (comparedParts,
// fieldmanager_compare.go): for a kind with a status subresource the
// part the write cannot change (status for the main resource, spec for
// status), and the fields equal in both. The result is the same; the
// comparison of, say, a pod's status write walks neither its spec nor
// its unchanged container statuses.
func (s *Server) trackUpdate(k *kind, sub string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	fm, err := k.fieldManager(sub)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if fm == nil {
		return obj, nil
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	live.GetObjectKind().SetGroupVersionKind(k.gvk)
	unchanged := ""
	switch {
	case !k.hasStatus:
	case sub == "status":
		unchanged = "Spec"
	default:
		unchanged = "Status"
	}
	l, o := live, obj
	var miss *updateMiss
	if acc, err := meta.Accessor(live); err == nil && acc.GetUID() != "" {
		// An update: a create's live object is empty, nothing in it
		// equal to leave out.
		l, o = comparedParts(live, obj, unchanged)
		var hit bool
		if hit, miss = k.fm.updateFromMemo(sub, manager, live, obj, l, o); hit {
			return obj, nil
		}
	}
	out, err := fm.Update(l, o, manager)
	if err != nil {
		// As UpdateNoErrors does: the stored entries are kept. Not
		// remembered: its order is the stored one, not sorted.
		out, miss = o, nil
		if acc, aerr := meta.Accessor(o); aerr == nil {
			if lacc, lerr := meta.Accessor(l); lerr == nil {
				acc.SetManagedFields(lacc.GetManagedFields())
			}
		}
	}
	from, err := meta.Accessor(out)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	to, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	to.SetManagedFields(from.GetManagedFields())
	miss.store(from.GetManagedFields())
	return obj, nil
}
