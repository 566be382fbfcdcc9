package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "allot.dev/allot/api/core/v1"
)

// Quantities are stored as their canonical text (Quantity.String), and two
// kinds of amount do not survive that as written:
//
//   - a decimal amount of 10^21 or more written without an exponent
//     ("100000000000000000000000000"): apimachinery keeps the amount
//     exactly, but its canonical text drops the power of ten it has no SI
//     suffix for and reads back as "100";
//   - an amount written with a binary suffix beyond 2^63-1
//     ("99999999999999999999999Ti"): the parser caps it at 2^63-1 before
//     anything else sees it.
//
// Neither is changed into another amount: ValidateQuantities refuses both,
// naming the field, on every write of every built-in kind (Validate,
// ValidateUpdate, ValidateStatusUpdate call it). Other amounts, however
// large (1e400), are kept exactly.

var (
	quantityType   = reflect.TypeOf(resource.Quantity{})
	rawType        = reflect.TypeOf(runtime.RawExtension{})
	objectMetaType = reflect.TypeOf(metav1.ObjectMeta{})
	holdsQuantity  sync.Map // reflect.Type -> bool
)

// ValidateQuantities checks every resource.Quantity in obj (a pointer to
// an API object, or any value) and names the field of each one that
// would not be stored as written.
func ValidateQuantities(obj any) field.ErrorList {
	if _, ok := obj.(*unstructured.Unstructured); ok || obj == nil {
		return nil // no typed quantities: a CRD's schema says what its fields are
	}
	var errs field.ErrorList
	walkQuantities(reflect.ValueOf(obj), nil, false, func(p *field.Path, q *resource.Quantity) {
		c := q.DeepCopy() // String caches its text: leave the input as it is
		if msg := quantityProblem(c); msg != "" {
			errs = append(errs, field.Invalid(p, c.String(), msg))
		}
	})
	return errs
}

// QuantityFields calls fn with the path of every quantity in v and a
// pointer to it; what fn writes there is stored back (also into maps).
// Map entries come in the map's order. Fuzz and round-trip tests use it to
// reach every field that takes a quantity.
func QuantityFields(obj any, fn func(p *field.Path, q *resource.Quantity)) {
	walkQuantities(reflect.ValueOf(obj), nil, true, fn)
}

// MaxQuantityExponent bounds the decimal exponent of a quantity's amount
// (1e1000 and 1e-1000 pass, 1e1001 does not): apimachinery compares
// amounts by computing the power of ten, which takes half a second for
// 1e4444440 and longer beyond, so a larger exponent would let one write
// stall every reader. No amount anyone counts comes near.
const MaxQuantityExponent = 1000

// exponentProblem says why q's exponent is out of bounds, or "". It does
// not compare amounts (that is what is slow).
func exponentProblem(q *resource.Quantity) string {
	c := q.DeepCopy()
	d := c.AsDec()
	if d.Scale() > MaxQuantityExponent || -int64(d.Scale()) > MaxQuantityExponent {
		return fmt.Sprintf("its decimal exponent must be between -%d and %d: larger ones cannot be compared in bounded time", MaxQuantityExponent, MaxQuantityExponent)
	}
	return ""
}

// quantityProblem says why q would not be stored as written, or "".
func quantityProblem(q resource.Quantity) string {
	if msg := exponentProblem(&q); msg != "" {
		return msg
	}
	if q.Format == resource.BinarySI {
		abs := q.DeepCopy()
		if abs.Sign() < 0 {
			abs.Neg()
		}
		if abs.Cmp(corev1.MaxQuantity) >= 0 {
			return "must be below 2^63-1 (8Ei) in magnitude when written with a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei): larger ones are capped at 2^63-1 when read, so they cannot be kept as written; write larger amounts with a decimal exponent (for example 1e30)"
		}
		return ""
	}
	back, err := resource.ParseQuantity(q.String())
	if err != nil || back.Cmp(q) != 0 {
		return fmt.Sprintf("cannot be stored as written: its canonical form %q reads back as another amount; write it with a decimal exponent (for example 1e26)", q.String())
	}
	return ""
}

func walkQuantities(v reflect.Value, p *field.Path, write bool, fn func(*field.Path, *resource.Quantity)) {
	if !v.IsValid() || !typeHoldsQuantity(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkQuantities(v.Elem(), p, write, fn)
		}
	case reflect.Struct:
		if v.Type() == quantityType {
			if v.CanAddr() {
				fn(p, v.Addr().Interface().(*resource.Quantity))
			} else {
				q := v.Interface().(resource.Quantity) // passed by value
				fn(p, &q)
			}
			return
		}
		for _, f := range quantityFieldsOf(v.Type()) {
			if emptyValue(v.Field(f.index)) {
				continue // no path built for a field without a quantity
			}
			fp := p
			if !f.inline {
				fp = childPath(p, f.name)
			}
			walkQuantities(v.Field(f.index), fp, write, fn)
		}
	case reflect.Slice, reflect.Array:
		if !typeHoldsQuantity(v.Type().Elem()) {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walkQuantities(v.Index(i), indexPath(p, i), write, fn)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key().Interface())
			// Map values are not addressable: walk a copy, and store
			// it back when asked to.
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(iter.Value())
			walkQuantities(val, keyPathOf(p, key), write, fn)
			if write {
				v.SetMapIndex(iter.Key(), val)
			}
		}
	}
}

// typeHoldsQuantity reports whether a value of t can contain a quantity,
// so that the walk skips the rest (metadata, strings, most of a pod).
func typeHoldsQuantity(t reflect.Type) bool {
	if v, ok := holdsQuantity.Load(t); ok {
		return v.(bool)
	}
	// A recursive type is taken as holding none while it is being looked
	// at (no API type with a quantity is recursive).
	holdsQuantity.Store(t, false)
	r := computeHoldsQuantity(t)
	holdsQuantity.Store(t, r)
	return r
}

func computeHoldsQuantity(t reflect.Type) bool {
	switch t {
	case quantityType:
		return true
	case rawType, objectMetaType:
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return typeHoldsQuantity(t.Elem())
	case reflect.Map:
		return typeHoldsQuantity(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() && typeHoldsQuantity(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// quantityField is a field of a struct type that can hold a quantity:
// its index, JSON name, and whether it is inlined.
type quantityField struct {
	index  int
	name   string
	inline bool
}

var quantityFieldPlans sync.Map // reflect.Type → []quantityField

// quantityFieldsOf returns the exported fields of struct type t that can
// hold a quantity and are not left out of JSON ("-"), in order; the walks
// read them instead of every field's tag on every visit.
func quantityFieldsOf(t reflect.Type) []quantityField {
	if v, ok := quantityFieldPlans.Load(t); ok {
		return v.([]quantityField)
	}
	var out []quantityField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || !typeHoldsQuantity(f.Type) {
			continue
		}
		name, inline := jsonName(f)
		if name != "-" {
			out = append(out, quantityField{index: i, name: name, inline: inline})
		}
	}
	quantityFieldPlans.Store(t, out)
	return out
}

func jsonName(f reflect.StructField) (name string, inline bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" && (f.Anonymous || strings.Contains(","+opts+",", ",inline,")) {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

func childPath(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

func indexPath(p *field.Path, i int) *field.Path {
	if p == nil {
		return field.NewPath("").Index(i)
	}
	return p.Index(i)
}

func keyPathOf(p *field.Path, k string) *field.Path {
	if p == nil {
		return field.NewPath("").Key(k)
	}
	return p.Key(k)
}

// ValidateQuantitiesAsWritten compares every quantity of obj, decoded
// from the JSON data, with the text it was decoded from, and names the
// field of each whose amount is not the one written: apimachinery's
// parser rounds amounts finer than 1n up to 1n and caps binary-suffixed
// ones at 2^63-1. raw is the object's JSON; amounts written as JSON
// numbers are compared too.
func ValidateQuantitiesAsWritten(obj any, data []byte) field.ErrorList {
	if _, ok := obj.(*unstructured.Unstructured); ok || obj == nil || !typeHoldsQuantity(reflect.TypeOf(obj)) {
		return nil
	}
	if !mayHoldInexactQuantity(data) {
		return nil // most writes: only plain quantities, if any
	}
	found := false
	walkQuantities(reflect.ValueOf(obj), nil, false, func(*field.Path, *resource.Quantity) { found = true })
	if !found {
		return nil // no quantity set, no second decode
	}
	return quantitiesAsWritten(obj, data)
}

// quantitiesAsWritten is ValidateQuantitiesAsWritten's comparison, done
// whatever the body holds.
func quantitiesAsWritten(obj any, data []byte) field.ErrorList {
	raw, err := writtenParts(reflect.TypeOf(obj), data)
	if err != nil {
		return nil // the decoder that made obj accepted it; nothing to compare
	}
	var errs field.ErrorList
	walkWritten(reflect.ValueOf(obj), raw, nil, func(p *field.Path, q *resource.Quantity, text string) {
		if msg := exponentProblem(q); msg != "" {
			errs = append(errs, field.Invalid(p, text, msg))
			return
		}
		written, ok := ExactQuantity(text)
		if !ok {
			return
		}
		if written.Cmp(ratOfQuantity(q)) != 0 {
			errs = append(errs, field.Invalid(p, text, fmt.Sprintf("cannot be stored as written: it reads as %s; amounts are kept to 1n (10^-9), and below 2^63-1 (8Ei) when written with a binary suffix (Ki, Mi, Gi, Ti, Pi, Ei)", q.String())))
		}
	})
	return errs
}

// writtenParts decodes data, a JSON object of type t, generically, but
// only its top-level fields that can hold a quantity (walkWritten reads
// no other): the rest, metadata with its managedFields above all, is
// only scanned, not turned into maps.
func writtenParts(t reflect.Type, data []byte) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return decodeNumbers(data)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		// A Decoder takes the first value and leaves what follows, as
		// the whole body's decode did; Unmarshal saves it a copy.
		top = nil
		if err := json.NewDecoder(bytes.NewReader(data)).Decode(&top); err != nil {
			return nil, err
		}
	}
	if top == nil {
		return nil, nil
	}
	names := quantityFieldNames(t)
	if names[""] { // an inline map or list: every key may hold one
		return decodeNumbers(data)
	}
	out := map[string]any{}
	for name := range names {
		r, ok := top[name]
		if !ok {
			continue
		}
		v, err := decodeNumbers(r)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

func decodeNumbers(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}

// quantityFieldNames are the JSON names of struct type t's fields, its
// inline structs' included, whose types can hold a quantity.
func quantityFieldNames(t reflect.Type) map[string]bool {
	if v, ok := quantityNames.Load(t); ok {
		return v.(map[string]bool)
	}
	names := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, inline := jsonName(f)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case name == "-":
		case inline && ft.Kind() == reflect.Struct:
			for n := range quantityFieldNames(ft) {
				names[n] = true
			}
		case typeHoldsQuantity(f.Type):
			names[name] = true
		}
	}
	quantityNames.Store(t, names)
	return names
}

var quantityNames sync.Map // reflect.Type → map[string]bool

// emptyValue reports whether v is a nil pointer, interface, map or slice
// or an empty one: nothing in it to walk.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return false
}

// walkWritten walks a decoded object and its generic JSON side by side.
func walkWritten(v reflect.Value, raw any, p *field.Path, fn func(*field.Path, *resource.Quantity, string)) {
	if !v.IsValid() || raw == nil || !typeHoldsQuantity(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkWritten(v.Elem(), raw, p, fn)
		}
	case reflect.Struct:
		if v.Type() == quantityType {
			q := v.Interface().(resource.Quantity)
			switch r := raw.(type) {
			case string:
				fn(p, &q, r)
			case json.Number:
				fn(p, &q, r.String())
			}
			return
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		for _, f := range quantityFieldsOf(v.Type()) {
			if f.inline {
				walkWritten(v.Field(f.index), raw, p, fn)
			} else if r := m[f.name]; r != nil {
				// The path is built only for a field written that can
				// hold a quantity: most fields of a pod are neither.
				walkWritten(v.Field(f.index), r, childPath(p, f.name), fn)
			}
		}
	case reflect.Slice, reflect.Array:
		l, ok := raw.([]any)
		if !ok {
			return
		}
		if !typeHoldsQuantity(v.Type().Elem()) {
			return
		}
		for i := 0; i < v.Len() && i < len(l); i++ {
			if l[i] != nil {
				walkWritten(v.Index(i), l[i], indexPath(p, i), fn)
			}
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			key := fmt.Sprint(iter.Key().Interface())
			if r := m[key]; r != nil {
				walkWritten(iter.Value(), r, keyPathOf(p, key), fn)
			}
		}
	}
}

var quantityText = regexp.MustCompile(`^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$`)

// maxExactExponent bounds the decimal exponents ExactQuantity evaluates
// (10^±100000 as a fraction is still small); beyond, it gives up.
const maxExactExponent = 100000

// ExactQuantity is the amount a quantity's text denotes, exactly, as
// written (no rounding, no cap); ok is false for text that is not a
// quantity or whose exponent is beyond ±100000.
func ExactQuantity(text string) (*big.Rat, bool) {
	m := quantityText.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(m[2])
	if !ok {
		return nil, false
	}
	exp10, exp2 := int64(0), int64(0)
	switch s := m[3]; s {
	case "":
	case "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
		exp2 = 10 * int64(strings.Index("KMGTPE", s[:1])+1)
	case "n":
		exp10 = -9
	case "u":
		exp10 = -6
	case "m":
		exp10 = -3
	case "k":
		exp10 = 3
	case "M":
		exp10 = 6
	case "G":
		exp10 = 9
	case "T":
		exp10 = 12
	case "P":
		exp10 = 15
	case "E":
		exp10 = 18
	default:
		e, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || e > maxExactExponent || e < -maxExactExponent {
			return nil, false
		}
		exp10 = e
	}
	if exp2 > 0 {
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(exp2))))
	}
	if exp10 != 0 {
		pow := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(absInt64(exp10)), nil))
		if exp10 > 0 {
			r.Mul(r, pow)
		} else {
			r.Quo(r, pow)
		}
	}
	if m[1] == "-" {
		r.Neg(r)
	}
	return r, true
}

// ratOfQuantity is q's amount as a fraction.
func ratOfQuantity(q *resource.Quantity) *big.Rat {
	d := q.AsDec()
	r := new(big.Rat).SetInt(d.UnscaledBig())
	scale := int64(d.Scale())
	if scale == 0 {
		return r
	}
	pow := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(absInt64(scale)), nil))
	if scale > 0 {
		return r.Quo(r, pow)
	}
	return r.Mul(r, pow)
}

func absInt64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// MaxQuantityText bounds the length of a quantity's text: the parser
// takes 2.6 s on a million digits (and grows faster than linearly). 1e1000
// written in full is 1001 characters.
const MaxQuantityText = 1024

// ValidateQuantityTexts checks, before a body is decoded into obj's type,
// the length (MaxQuantityText) and the exponent of every text in a field
// that takes a quantity: parsing
// 1e-99999999 alone takes apimachinery over a minute (it rounds by
// computing the power of ten), so such a body is refused before it is
// decoded, naming the field. data is the body's JSON; text elsewhere
// (annotations, strings) is not looked at.
func ValidateQuantityTexts(obj any, data []byte) field.ErrorList {
	if _, ok := obj.(*unstructured.Unstructured); ok || obj == nil || !typeHoldsQuantity(reflect.TypeOf(obj)) || !hasLongExponent(data) {
		return nil
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil // the decoder will say what is wrong
	}
	var errs field.ErrorList
	walkTypeRaw(reflect.TypeOf(obj), raw, nil, func(p *field.Path, text string) {
		if len(text) > MaxQuantityText {
			errs = append(errs, field.TooLong(p, "", MaxQuantityText))
			return
		}
		m := quantityText.FindStringSubmatch(strings.TrimSpace(text))
		if m == nil || (m[3] == "" || (m[3][0] != 'e' && m[3][0] != 'E')) {
			return
		}
		if e, err := strconv.ParseInt(m[3][1:], 10, 64); err != nil || e > MaxQuantityExponent || e < -MaxQuantityExponent {
			errs = append(errs, field.Invalid(p, text, fmt.Sprintf("its decimal exponent must be between -%d and %d: larger ones cannot be parsed or compared in bounded time", MaxQuantityExponent, MaxQuantityExponent)))
		}
	})
	return errs
}

// walkTypeRaw walks generic JSON guided by the Go type it is for, and
// calls fn with the text at every quantity.
func walkTypeRaw(t reflect.Type, raw any, p *field.Path, fn func(*field.Path, string)) {
	if raw == nil || !typeHoldsQuantity(t) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		walkTypeRaw(t.Elem(), raw, p, fn)
	case reflect.Struct:
		if t == quantityType {
			switch r := raw.(type) {
			case string:
				fn(p, r)
			case json.Number:
				fn(p, r.String())
			}
			return
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		for _, f := range quantityFieldsOf(t) {
			if f.inline {
				walkTypeRaw(t.Field(f.index).Type, raw, p, fn)
			} else if r := m[f.name]; r != nil {
				walkTypeRaw(t.Field(f.index).Type, r, childPath(p, f.name), fn)
			}
		}
	case reflect.Slice, reflect.Array:
		l, ok := raw.([]any)
		if !ok {
			return
		}
		for i, v := range l {
			walkTypeRaw(t.Elem(), v, indexPath(p, i), fn)
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkTypeRaw(t.Elem(), m[k], keyPathOf(p, k), fn)
		}
	}
}
