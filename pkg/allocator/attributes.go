package allocator

import (
	"fmt"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator/celenv"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// attrSet is an instance's effective attributes by name. Later writers win:
// the parent's set, the enclosing group's references, the instance's own
// references in order, then its own attributes.
type attrSet map[string]resourceapi.AttributeValue

func (s attrSet) clone() attrSet {
	c := make(attrSet, len(s)+4)
	for k, v := range s {
		c[k] = v
	}
	return c
}

func (s attrSet) add(attrs []resourceapi.Attribute) {
	for _, a := range attrs {
		s[a.Name] = a.AttributeValue
	}
}

// attrVars is the CEL activation of one instance: its effective attributes
// as one map per type. It is built once per instance and never changes, so
// it is shared by every evaluation.
type attrVars struct {
	quantities, bools, ints, intslices, strings, stringslices, versions ref.Val
}

var _ interpreter.Activation = (*attrVars)(nil)

// ResolveName implements interpreter.Activation.
func (a *attrVars) ResolveName(name string) (any, bool) {
	switch name {
	case VarQuantities:
		return a.quantities, true
	case VarBools:
		return a.bools, true
	case VarInts:
		return a.ints, true
	case VarIntSlices:
		return a.intslices, true
	case VarStrings:
		return a.strings, true
	case VarStringSlices:
		return a.stringslices, true
	case VarVersions:
		return a.versions, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *attrVars) Parent() interpreter.Activation { return nil }

// newAttrVars converts effective attributes into CEL values. An attribute
// with no value or more than one, or an unparsable version, is an error:
// the instance is then not allocatable, because a selector could wrongly
// match an instance whose attributes are not what the driver meant.
func newAttrVars(s attrSet) (*attrVars, error) {
	maps := make([]map[ref.Val]ref.Val, 7)
	for i := range maps {
		maps[i] = map[ref.Val]ref.Val{}
	}
	for name, v := range s {
		slot, val, err := attrValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		maps[slot][types.String(name)] = val
	}
	reg := types.DefaultTypeAdapter
	mk := func(i int) ref.Val { return types.NewRefValMap(reg, maps[i]) }
	return &attrVars{
		quantities: mk(0), bools: mk(1), ints: mk(2), intslices: mk(3),
		strings: mk(4), stringslices: mk(5), versions: mk(6),
	}, nil
}

// attrValue returns the map slot (index into newAttrVars' maps) and CEL value
// of one attribute value.
func attrValue(v resourceapi.AttributeValue) (int, ref.Val, error) {
	slot, n := -1, 0
	var val ref.Val
	if v.Quantity != nil {
		slot, val, n = 0, celenv.NewQuantity(*v.Quantity), n+1
	}
	if v.Bool != nil {
		slot, val, n = 1, types.Bool(*v.Bool), n+1
	}
	if v.Int != nil {
		slot, val, n = 2, types.Int(*v.Int), n+1
	}
	if v.IntSlice != nil {
		slot, val, n = 3, types.NewDynamicList(types.DefaultTypeAdapter, append([]int64(nil), *v.IntSlice...)), n+1
	}
	if v.String != nil {
		slot, val, n = 4, types.String(*v.String), n+1
	}
	if v.StringSlice != nil {
		slot, val, n = 5, types.NewStringList(types.DefaultTypeAdapter, append([]string(nil), *v.StringSlice...)), n+1
	}
	if v.Version != nil {
		ver, err := ParseVersion(*v.Version)
		if err != nil {
			return 0, nil, err
		}
		slot, val, n = 6, celenv.NewSemver(ver), n+1
	}
	if n != 1 {
		return 0, nil, fmt.Errorf("must have exactly one value, has %d", n)
	}
	return slot, val, nil
}
