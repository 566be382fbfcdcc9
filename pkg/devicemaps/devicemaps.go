// Package devicemaps shares equal resource.k8s.io/v1 device attribute
// and capacity maps. Drivers publish the same attributes on every node
// (model, family, driver version, memory), and a device's own ones (a
// NUMA number, an index) repeat from node to node, so a cluster's devices
// hold a few distinct maps, not one each: a v1 attribute map of four
// entries takes about 700 bytes, more than the rest of its device.
//
// The caller's duties: hand in maps nobody writes any more, and never
// write a map handed out (it may be another device's, in another
// component of the process). The informers of ResourceSlices
// (client.Factory.ResourceSlices) and the allocator's projection of seed
// devices intern through Shared, so one process holds one map per
// content.
//
// Equal means the same names with the same values as they encode: an
// attribute by its kind and value, a quantity by its canonical form. A
// map with a value outside that (an attribute that sets no value, a
// capacity with a requestPolicy) is not interned: it is returned as it
// is. The table keeps at most Max maps of each kind and then starts
// over, so that the devices of nodes long gone, or attributes that never
// repeat (a UUID), cost a bounded table, not a leak; maps handed out
// before stay shared by their holders.
package devicemaps

import (
	"slices"
	"strconv"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
)

// Max is how many maps of each kind an Interner keeps.
const Max = 4096

// Shared is the process's interner.
var Shared = &Interner{}

// Interner hands out one map per content. The zero value is ready;
// safe for concurrent use.
type Interner struct {
	mu    sync.Mutex
	attrs map[string]map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	caps  map[string]map[resourcev1.QualifiedName]resourcev1.DeviceCapacity
	key   []byte // scratch, under mu
	names []resourcev1.QualifiedName
}

// Slice replaces the attribute and capacity maps of the slice's devices
// with the held equal ones. The slice must be the caller's own (freshly
// decoded, not yet shared).
func (c *Interner) Slice(s *resourcev1.ResourceSlice) {
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.Attributes, d.Capacity = c.Attributes(d.Attributes), c.Capacities(d.Capacity)
	}
}

// Attributes returns the held map equal to attrs (attrs itself the first
// time).
func (c *Interner) Attributes(attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
	if len(attrs) == 0 {
		return attrs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = c.key[:0]
	c.names = sortedNames(c.names, attrs)
	for _, n := range c.names {
		a := attrs[n]
		c.key = appendString(c.key, string(n))
		set := false
		if a.BoolValue != nil {
			c.key = strconv.AppendBool(append(c.key, 'b'), *a.BoolValue)
			c.key, set = append(c.key, ';'), true
		}
		if a.IntValue != nil {
			c.key = strconv.AppendInt(append(c.key, 'i'), *a.IntValue, 10)
			c.key, set = append(c.key, ';'), true
		}
		if a.StringValue != nil {
			c.key, set = appendString(append(c.key, 's'), *a.StringValue), true
		}
		if a.VersionValue != nil {
			c.key, set = appendString(append(c.key, 'v'), *a.VersionValue), true
		}
		if !set {
			return attrs // no value: compared no further
		}
		c.key = append(c.key, '.')
	}
	return hold(&c.attrs, c.key, attrs)
}

// Capacities returns the held map equal to caps (caps itself the first
// time).
func (c *Interner) Capacities(caps map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) map[resourcev1.QualifiedName]resourcev1.DeviceCapacity {
	if len(caps) == 0 {
		return caps
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = c.key[:0]
	c.names = sortedNames(c.names, caps)
	for _, n := range c.names {
		v := caps[n]
		if v.RequestPolicy != nil {
			return caps // compared no further
		}
		c.key = appendString(c.key, string(n))
		c.key = appendString(c.key, v.Value.String())
	}
	return hold(&c.caps, c.key, caps)
}

// sortedNames returns m's names in order, in names' space.
func sortedNames[V any](names []resourcev1.QualifiedName, m map[resourcev1.QualifiedName]V) []resourcev1.QualifiedName {
	names = names[:0]
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// hold returns the map held under key, or holds m there, starting the
// table over at Max.
func hold[V any](table *map[string]map[resourcev1.QualifiedName]V, key []byte, m map[resourcev1.QualifiedName]V) map[resourcev1.QualifiedName]V {
	if held, ok := (*table)[string(key)]; ok {
		return held
	}
	if *table == nil || len(*table) >= Max {
		*table = map[string]map[resourcev1.QualifiedName]V{}
	}
	(*table)[string(key)] = m
	return m
}

// appendString appends s to a key, length first, so that no two
// sequences of strings give the same key.
func appendString(key []byte, s string) []byte {
	key = strconv.AppendInt(key, int64(len(s)), 10)
	key = append(key, ':')
	return append(key, s...)
}
