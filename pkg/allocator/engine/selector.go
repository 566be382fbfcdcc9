package engine

// Device selectors of resource.k8s.io/v1: the CEL environment of upstream's
// k8s.io/dynamic-resource-allocation/cel, on cel.dev/cel-go.
//
// A selector sees one variable, device, of the object type
// kubernetes.DRADevice with the fields
//
//	driver                   string
//	attributes               map(string, map(string, <attribute value>))
//	capacity                 map(string, map(string, kubernetes.Quantity))
//	allowMultipleAllocations bool
//
// attributes and capacity are keyed by domain, then by ID: a device
// attribute named "domain/id" is attributes["domain"]["id"], and an
// unqualified name belongs to the driver's domain. A domain that the device
// does not have is an empty map, so `"x" in device.attributes["other.org"]`
// is false; a missing ID is an evaluation error ("no such key"), which fails
// the match rather than making it false. Attribute values are int, bool,
// string or, for version attributes, kubernetes.Semver.
//
// The environment is upstream's: Kubernetes' base CEL environment (the
// standard library, optional types, cross-type numeric comparisons,
// homogeneous aggregate literals, the string extensions at version 2, sets,
// two-variable comprehensions, the list extensions at version 3, and the
// Kubernetes libraries of package celenv) plus cel.bind. Like upstream there
// are two flavours: admission (CompileDeviceSelector) checks new selectors
// against the environment at the compatibility version of Kubernetes 1.36,
// and evaluation (MatchDeviceSelector) runs stored selectors in the newest
// environment, which also has the list function includes() and types
// attribute values as dyn instead of google.protobuf.Any.
//
// Known differences from upstream, all deliberate:
//   - quantity equality is symmetric: upstream fails
//     `quantity("70k") == quantity("50k").add(quantity("20k"))` with "no
//     such overload" (a pointer/value mix-up) while the operands swapped
//     work; here both are true.
//   - quantity() fails and isQuantity() is false for strings longer than 64
//     bytes or with an exponent of more than 3 digits (package celenv's
//     one quantity parser): upstream parses "1e-99999999" for minutes.
//   - attributes are read lazily, so an attribute upstream cannot convert
//     (an unparsable version, a list value, no value) is an error only for
//     selectors that read it; upstream fails every selector on the device.
//   - type(device) == kubernetes.DRADevice evaluates (upstream fails to
//     build the program).
//   - static cost estimates come from cel.dev/cel-go's cost model with
//     upstream's prices for the Kubernetes functions and upstream's device
//     size limits; they are within a few percent of upstream's.
//   - upstream's authorizer library is not provided: the device environment
//     has no authorizer variable, so no upstream selector can use it.

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"allot.dev/allot/pkg/allocator/celenv"
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	resourcev1 "k8s.io/api/resource/v1"
)

// Limits on resource.k8s.io/v1 device selectors: upstream's
// CELSelectorExpressionMaxLength and CELSelectorExpressionMaxCost.
const (
	// MaxDeviceSelectorLength is the longest selector CompileDeviceSelector
	// accepts, in bytes.
	MaxDeviceSelectorLength = 10 * 1024
	// DeviceSelectorCostLimit bounds the static cost estimate that
	// CompileDeviceSelector checks and the actual cost of one evaluation by
	// MatchDeviceSelector, in CEL cost units.
	DeviceSelectorCostLimit = 1_000_000
)

// DeviceSelectorInput is what a resource.k8s.io/v1 device selector sees of a device.
// Attribute and capacity names are "domain/id" or a bare "id" in the
// driver's domain. Only scalar attribute values (int, bool, string,
// version) are supported; list-typed values (behind an upstream feature
// gate that is off by default) make the attribute an evaluation error when
// a selector reads it.
type DeviceSelectorInput struct {
	Driver                   string
	Attributes               map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	Capacity                 map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	AllowMultipleAllocations bool
}

// CompileDeviceSelector checks a resource.k8s.io/v1 device selector as
// upstream admission does: at most MaxDeviceSelectorLength bytes, it must
// compile in the environment for new selectors, evaluate to bool (or to an
// attribute value, whose type is only known at evaluation), and have a
// static cost estimate within DeviceSelectorCostLimit for the largest
// devices the API allows. The error wraps celenv.ErrInvalidSelector and says why.
// Results are cached.
func CompileDeviceSelector(expr string) error {
	if e, ok := dselAdmissionCache.get(expr); ok {
		return e.err
	}
	err := dselCheck(expr)
	dselAdmissionCache.add(expr, &dselCacheEntry{err: err})
	return err
}

// MatchDeviceSelector reports whether the device satisfies the
// resource.k8s.io/v1 selector. An evaluation error, such as reading an
// attribute the device does not have or exceeding DeviceSelectorCostLimit,
// is returned as an error, not as a mismatch: upstream fails the allocation
// with it. A selector that does not compile returns an error wrapping
// celenv.ErrInvalidSelector. Compiled selectors are cached; MatchDeviceSelector is
// safe for concurrent use.
func MatchDeviceSelector(expr string, d DeviceSelectorInput) (bool, error) {
	e, ok := dselProgramCache.get(expr)
	if !ok {
		e = dselCompileProgram(expr)
		dselProgramCache.add(expr, e)
	}
	if e.err != nil {
		return false, e.err
	}
	in := dselInputPool.Get().(*dselInput)
	in.dev = d
	match, err := dselResult(e.prog.Eval(in))
	// Nothing of the input outlives the evaluation: the result is a bool
	// and error texts are formatted when the errors are made.
	in.reset()
	dselInputPool.Put(in)
	return match, err
}

func dselResult(out ref.Val, _ *cel.EvalDetails, err error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("evaluate device selector: %w", err)
	}
	switch out {
	case types.True:
		return true, nil
	case types.False:
		return false, nil
	}
	return false, fmt.Errorf("evaluate device selector: CEL result of type %s could not be converted to bool", out.Type().TypeName())
}

const (
	dselDeviceVar      = "device"
	dselDeviceTypeName = "kubernetes.DRADevice"
)

// Size limits of a device in the v1 API, for the static cost estimate.
const (
	dselMaxEntries   = resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice
	dselMaxDomain    = resourcev1.DeviceMaxDomainLength
	dselMaxID        = resourcev1.DeviceMaxIDLength
	dselMaxDriver    = resourcev1.DriverNameMaxLength
	dselMaxAttrValue = resourcev1.DeviceAttributeMaxValueLength
)

var dselDeviceType = cel.ObjectType(dselDeviceTypeName)

// dselEnv is one flavour of the environment, with the program options that
// go with it.
type dselEnv struct {
	env       *cel.Env
	attrType  *cel.Type // the type of attribute values
	progOpts  []cel.ProgramOption
	estimator *celenv.CostEstimator
}

var (
	dselNewExpressionsEnv    = sync.OnceValues(func() (*dselEnv, error) { return newDselEnv(false) })
	dselStoredExpressionsEnv = sync.OnceValues(func() (*dselEnv, error) { return newDselEnv(true) })
)

func newDselEnv(stored bool) (*dselEnv, error) {
	attrType, listsVersion := cel.AnyType, uint32(0)
	if stored {
		attrType, listsVersion = cel.DynType, 1
	}
	desc := newDselDeviceDesc(attrType)
	opts := append(celenv.K8sEnvOptions(listsVersion), cel.Types(desc), cel.Variable(dselDeviceVar, dselDeviceType))
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("create CEL environment for v1 device selectors: %w", err)
	}
	celenv.WarmChecker(env)
	estimator := celenv.NewCostEstimator(dselDeviceSizes())
	return &dselEnv{
		env:       env,
		attrType:  attrType,
		estimator: estimator,
		progOpts:  celenv.K8sProgramOptions(DeviceSelectorCostLimit),
	}, nil
}

// compile parses and type-checks a selector and makes it a program.
func (e *dselEnv) compile(expr string) (*cel.Ast, cel.Program, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil, fmt.Errorf("%w: empty", celenv.ErrInvalidSelector)
	}
	checked, iss := e.env.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("%w: compilation failed: %s", celenv.ErrInvalidSelector, celenv.IssueSummary(iss))
	}
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(e.attrType) {
		return nil, nil, fmt.Errorf("%w: must evaluate to bool or the unknown type, not %s", celenv.ErrInvalidSelector, t)
	}
	prog, err := e.env.Program(checked, e.progOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", celenv.ErrInvalidSelector, err)
	}
	return checked, prog, nil
}

func dselCheck(expr string) error {
	if len(expr) > MaxDeviceSelectorLength {
		return fmt.Errorf("%w: %d bytes, more than the limit of %d", celenv.ErrInvalidSelector, len(expr), MaxDeviceSelectorLength)
	}
	env, err := dselNewExpressionsEnv()
	if err != nil {
		return err
	}
	checked, _, err := env.compile(expr)
	if err != nil {
		return err
	}
	est, err := env.env.EstimateCost(checked, env.estimator)
	if err != nil {
		return fmt.Errorf("%w: estimate cost: %w", celenv.ErrInvalidSelector, err)
	}
	if est.Max > DeviceSelectorCostLimit {
		return fmt.Errorf("%w: too complex: estimated cost %d exceeds the limit of %d; simplify the expression",
			celenv.ErrInvalidSelector, est.Max, DeviceSelectorCostLimit)
	}
	return nil
}

func dselCompileProgram(expr string) *dselCacheEntry {
	env, err := dselStoredExpressionsEnv()
	if err != nil {
		return &dselCacheEntry{err: err}
	}
	_, prog, err := env.compile(expr)
	return &dselCacheEntry{prog: prog, err: err}
}

// dselSizeNode is the largest size of a part of a device in the v1 API.
type dselSizeNode struct {
	max       uint64
	fields    map[string]*dselSizeNode
	key, elem *dselSizeNode
}

// dselDeviceSizes returns the size estimator of the device variable: at most
// 32 attributes and capacities, domains of 63 bytes, IDs of 32 bytes,
// values of 64 bytes. An attribute read by name (.model) is an attribute
// value; other names unknown to the type have no estimate.
func dselDeviceSizes() func(cost.AstNode) *cost.SizeEstimate {
	attrValue := &dselSizeNode{max: dselMaxAttrValue}
	innerAttrs := &dselSizeNode{max: dselMaxEntries, key: &dselSizeNode{max: dselMaxID}, elem: attrValue}
	innerCaps := &dselSizeNode{max: dselMaxEntries, key: &dselSizeNode{max: dselMaxID}, elem: &dselSizeNode{}}
	domain := &dselSizeNode{max: dselMaxDomain}
	device := &dselSizeNode{fields: map[string]*dselSizeNode{
		"driver":                   {max: dselMaxDriver},
		"allowMultipleAllocations": {max: 1},
		"attributes":               {max: dselMaxEntries, key: domain, elem: innerAttrs},
		"capacity":                 {max: dselMaxEntries, key: domain, elem: innerCaps},
	}}
	return func(n cost.AstNode) *cost.SizeEstimate {
		path := n.Path()
		if len(path) == 0 || path[0] != dselDeviceVar {
			return nil
		}
		cur := device
		for _, name := range path[1:] {
			switch name {
			case "@items", "@values":
				cur = cur.elem
			case "@keys":
				cur = cur.key
			default:
				switch f, ok := cur.fields[name]; {
				case ok:
					cur = f
				case cur.elem == attrValue:
					cur = attrValue
				default:
					cur = nil
				}
			}
			if cur == nil {
				return nil
			}
		}
		return &cost.SizeEstimate{Min: 0, Max: cur.max}
	}
}

// dselDeviceDesc declares the kubernetes.DRADevice type and reads its fields
// from a *dselInput.
type dselDeviceDesc struct {
	names  []string
	fields map[string]*types.FieldType
}

var _ types.StructTypeDescriptor = (*dselDeviceDesc)(nil)

func newDselDeviceDesc(attrType *cel.Type) *dselDeviceDesc {
	always := func(any) bool { return true }
	field := func(t *cel.Type, get func(*dselInput) ref.Val) *types.FieldType {
		return &types.FieldType{Type: t, IsSet: always, GetFrom: func(obj any) (any, error) {
			in, ok := obj.(*dselInput)
			if !ok {
				return nil, fmt.Errorf("%s: unexpected value of type %T", dselDeviceTypeName, obj)
			}
			return get(in), nil
		}}
	}
	d := &dselDeviceDesc{fields: map[string]*types.FieldType{
		"driver": field(cel.StringType, (*dselInput).driver),
		"allowMultipleAllocations": field(cel.BoolType, func(in *dselInput) ref.Val {
			return types.Bool(in.dev.AllowMultipleAllocations)
		}),
		"attributes": field(cel.MapType(cel.StringType, cel.MapType(cel.StringType, attrType)),
			func(in *dselInput) ref.Val { return &in.attrs }),
		"capacity": field(cel.MapType(cel.StringType, cel.MapType(cel.StringType, celenv.K8sQuantityType)),
			func(in *dselInput) ref.Val { return &in.caps }),
	}}
	for name := range d.fields {
		d.names = append(d.names, name)
	}
	slices.Sort(d.names)
	return d
}

func (*dselDeviceDesc) HasTrait(trait int) bool {
	return trait == traits.FieldTesterType || trait == traits.IndexerType
}
func (*dselDeviceDesc) TypeName() string          { return dselDeviceTypeName }
func (*dselDeviceDesc) ReflectType() reflect.Type { return nil }
func (d *dselDeviceDesc) FieldNames() []string    { return d.names }
func (d *dselDeviceDesc) FindFieldType(name string) (*types.FieldType, bool) {
	f, ok := d.fields[name]
	return f, ok
}
func (*dselDeviceDesc) NewValue(types.Adapter, map[string]ref.Val) ref.Val {
	return types.NewErr("%s values cannot be created in a selector", dselDeviceTypeName)
}
func (*dselDeviceDesc) Adapt(_ types.Adapter, value any) ref.Val {
	if in, ok := value.(*dselInput); ok {
		return in
	}
	return types.NewErr("unsupported conversion of %T to %s", value, dselDeviceTypeName)
}

// dselInput is one evaluation's activation and its device variable. The
// attribute and capacity maps are views over the DeviceSelectorInput that look names
// up as they are read: no per-device maps are built. Inputs are pooled.
type dselInput struct {
	dev    DeviceSelectorInput
	attrs  dselDomains
	caps   dselDomains
	views  [4]dselDomain // the first domain views handed out, reused
	nviews int

	// The CEL value of the last driver name this input saw, kept across
	// evaluations: the driver of consecutive devices is usually the same.
	lastDriver    string
	lastDriverVal ref.Val
}

var dselInputPool = sync.Pool{New: func() any {
	in := &dselInput{}
	in.attrs = dselDomains{in: in}
	in.caps = dselDomains{in: in, capacity: true}
	return in
}}

func (in *dselInput) reset() {
	in.dev = DeviceSelectorInput{}
	in.views = [4]dselDomain{}
	in.nviews = 0
}

// driver returns device.driver.
func (in *dselInput) driver() ref.Val {
	if in.lastDriverVal == nil || in.lastDriver != in.dev.Driver {
		in.lastDriver, in.lastDriverVal = in.dev.Driver, types.String(in.dev.Driver)
	}
	return in.lastDriverVal
}

// ResolveName implements interpreter.Activation.
func (in *dselInput) ResolveName(name string) (any, bool) {
	if name == dselDeviceVar {
		return in, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *dselInput) Parent() interpreter.Activation { return nil }

// ConvertToNative implements ref.Val.
func (in *dselInput) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", dselDeviceTypeName, t)
}

// ConvertToType implements ref.Val.
func (in *dselInput) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.TypeType:
		return dselDeviceType
	}
	if t.TypeName() == dselDeviceTypeName {
		return in
	}
	return types.NewErr("type conversion error from '%s' to '%s'", dselDeviceTypeName, t)
}

// Equal implements ref.Val.
func (in *dselInput) Equal(other ref.Val) ref.Val { return types.Bool(other == in) }

// Type implements ref.Val.
func (in *dselInput) Type() ref.Type { return dselDeviceType }

// Value implements ref.Val; the field getters receive it.
func (in *dselInput) Value() any { return in }

// view returns the map of one domain's attributes or capacities.
func (in *dselInput) view(domain string, capacity bool) *dselDomain {
	for i := range in.nviews {
		if v := &in.views[i]; v.capacity == capacity && v.domain == domain {
			return v
		}
	}
	if in.nviews < len(in.views) {
		v := &in.views[in.nviews]
		in.nviews++
		*v = dselDomain{in: in, domain: domain, capacity: capacity}
		return v
	}
	return &dselDomain{in: in, domain: domain, capacity: capacity}
}

// names lists the attribute or capacity names of the device.
func (in *dselInput) names(capacity bool) []resourcev1.QualifiedName {
	if capacity {
		return slices.Collect(maps.Keys(in.dev.Capacity))
	}
	return slices.Collect(maps.Keys(in.dev.Attributes))
}

// dselSplitName splits a name into domain and ID; a name without a
// domain is in the driver's.
func dselSplitName(name resourcev1.QualifiedName, driver string) (string, string) {
	if domain, id, ok := strings.Cut(string(name), "/"); ok {
		return domain, id
	}
	return driver, string(name)
}

// dselLookup finds the entry that dselSplitName puts at domain
// and id, without building the qualified name on the heap.
func dselLookup[V any](m map[resourcev1.QualifiedName]V, driver, domain, id string) (V, bool) {
	var zero V
	if strings.Contains(domain, "/") {
		return zero, false // no name splits into such a domain
	}
	if domain == driver && !strings.Contains(id, "/") {
		if v, ok := m[resourcev1.QualifiedName(id)]; ok {
			return v, true
		}
	}
	var buf [128]byte
	b := append(append(append(buf[:0], domain...), '/'), id...)
	v, ok := m[resourcev1.QualifiedName(b)]
	return v, ok
}

// dselDomains is device.attributes or device.capacity: a map from domain to
// that domain's map. Looking up a domain the device does not have gives an
// empty map, as upstream.
type dselDomains struct {
	in       *dselInput
	capacity bool
}

var _ traits.Mapper = (*dselDomains)(nil)

func (m *dselDomains) domains() []string {
	var out []string
	for _, name := range m.in.names(m.capacity) {
		d, _ := dselSplitName(name, m.in.dev.Driver)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func (m *dselDomains) has(domain string) bool {
	for _, name := range m.in.names(m.capacity) {
		if d, _ := dselSplitName(name, m.in.dev.Driver); d == domain {
			return true
		}
	}
	return false
}

func (m *dselDomains) Find(key ref.Val) (ref.Val, bool) {
	s, ok := key.(types.String)
	if !ok {
		s = "/" // no domain has a slash: an empty map
	}
	return m.in.view(string(s), m.capacity), true
}

func (m *dselDomains) Get(key ref.Val) ref.Val {
	v, _ := m.Find(key)
	return v
}

func (m *dselDomains) Contains(key ref.Val) ref.Val {
	s, ok := key.(types.String)
	if !ok {
		return types.ValOrErr(key, "no such overload")
	}
	return types.Bool(m.has(string(s)))
}

func (m *dselDomains) Iterator() traits.Iterator { return &dselKeyIterator{keys: m.domains()} }
func (m *dselDomains) Size() ref.Val             { return types.Int(len(m.domains())) }
func (m *dselDomains) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from map to '%v'", t)
}
func (m *dselDomains) ConvertToType(t ref.Type) ref.Val { return dselMapConvertToType(m, t) }
func (m *dselDomains) Equal(other ref.Val) ref.Val      { return dselMapEqual(m, other) }
func (m *dselDomains) Type() ref.Type                   { return types.MapType }
func (m *dselDomains) Value() any                       { return m }

// dselDomain is the map of one domain's attributes (ID to value) or
// capacities (ID to quantity).
type dselDomain struct {
	in       *dselInput
	domain   string
	capacity bool
}

var _ traits.Mapper = (*dselDomain)(nil)

func (m *dselDomain) ids() []string {
	var out []string
	for _, name := range m.in.names(m.capacity) {
		if d, id := dselSplitName(name, m.in.dev.Driver); d == m.domain && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (m *dselDomain) Find(key ref.Val) (ref.Val, bool) {
	id, ok := key.(types.String)
	if !ok {
		return types.NewErr("unsupported key type %s", key.Type().TypeName()), false
	}
	d := &m.in.dev
	if m.capacity {
		c, ok := dselLookup(d.Capacity, d.Driver, m.domain, string(id))
		if !ok {
			return nil, false
		}
		return celenv.NewK8sQuantity(c.Value), true
	}
	a, ok := dselLookup(d.Attributes, d.Driver, m.domain, string(id))
	if !ok {
		return nil, false
	}
	return dselAttributeValue(m.domain, string(id), a), true
}

func (m *dselDomain) Get(key ref.Val) ref.Val {
	v, ok := m.Find(key)
	if !ok {
		if v != nil {
			return v
		}
		return types.ValOrErr(key, "no such key: %v", key)
	}
	return v
}

func (m *dselDomain) Contains(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok {
		return types.ValOrErr(key, "no such overload")
	}
	_, found := m.Find(key)
	return types.Bool(found)
}

func (m *dselDomain) Iterator() traits.Iterator { return &dselKeyIterator{keys: m.ids()} }
func (m *dselDomain) Size() ref.Val             { return types.Int(len(m.ids())) }
func (m *dselDomain) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from map to '%v'", t)
}
func (m *dselDomain) ConvertToType(t ref.Type) ref.Val { return dselMapConvertToType(m, t) }
func (m *dselDomain) Equal(other ref.Val) ref.Val      { return dselMapEqual(m, other) }
func (m *dselDomain) Type() ref.Type                   { return types.MapType }
func (m *dselDomain) Value() any                       { return m }

// dselAttributeValue is the CEL value of an attribute: int, bool, string, or
// kubernetes.Semver for a version.
func dselAttributeValue(domain, id string, a resourcev1.DeviceAttribute) ref.Val {
	switch {
	case a.IntValue != nil:
		return types.Int(*a.IntValue)
	case a.BoolValue != nil:
		return types.Bool(*a.BoolValue)
	case a.StringValue != nil:
		return types.String(*a.StringValue)
	case a.VersionValue != nil:
		v := celenv.K8sVersion(*a.VersionValue)
		if types.IsError(v) {
			return types.NewErr("attribute %s/%s: parse semantic version: %v", domain, id, v)
		}
		return v
	case a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil:
		return types.NewErr("attribute %s/%s: list-typed attribute values are not supported", domain, id)
	}
	return types.NewErr("attribute %s/%s: unsupported attribute value", domain, id)
}

func dselMapConvertToType(m traits.Mapper, t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// dselMapEqual compares maps entry by entry.
func dselMapEqual(m traits.Mapper, other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if m.Size().Equal(o.Size()) != types.True {
		return types.False
	}
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		ov, found := o.Find(k)
		if !found {
			return types.False
		}
		if eq := m.Get(k).Equal(ov); eq != types.True {
			if types.IsError(eq) {
				return eq
			}
			return types.False
		}
	}
	return types.True
}

// dselKeyIterator iterates over the keys of a dselDomains or dselDomain.
type dselKeyIterator struct {
	keys []string
	i    int
}

func (it *dselKeyIterator) HasNext() ref.Val { return types.Bool(it.i < len(it.keys)) }
func (it *dselKeyIterator) Next() ref.Val {
	if it.i >= len(it.keys) {
		return nil
	}
	it.i++
	return types.String(it.keys[it.i-1])
}
func (it *dselKeyIterator) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from iterator to '%v'", t)
}
func (it *dselKeyIterator) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("type conversion error from iterator")
}
func (it *dselKeyIterator) Equal(ref.Val) ref.Val { return types.NoSuchOverloadErr() }
func (it *dselKeyIterator) Type() ref.Type        { return types.IteratorType }
func (it *dselKeyIterator) Value() any            { return it }

// dselCache holds compiled selectors (or their errors). Reads take a shared
// lock; when full, an entry not read since the last eviction sweep goes
// (an approximation of least recently used).
type dselCache struct {
	mu sync.RWMutex
	m  map[string]*dselCacheEntry
}

type dselCacheEntry struct {
	prog cel.Program
	err  error
	used atomic.Bool
}

var dselProgramCache, dselAdmissionCache = newDselCache(), newDselCache()

func newDselCache() *dselCache { return &dselCache{m: map[string]*dselCacheEntry{}} }

func (c *dselCache) get(key string) (*dselCacheEntry, bool) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if ok && !e.used.Load() {
		e.used.Store(true)
	}
	return e, ok
}

// dselCacheSize bounds the compiled device selectors kept.
const dselCacheSize = 4096

func (c *dselCache) add(key string, e *dselCacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	for pass := 0; len(c.m) >= dselCacheSize && pass < 2; pass++ {
		for k, old := range c.m {
			if pass == 0 && old.used.Swap(false) {
				continue
			}
			delete(c.m, k)
			break
		}
	}
	c.m[key] = e
}
