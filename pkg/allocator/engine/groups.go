package engine

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// v1lgroup is an inventory group with devices on the node: the consumers
// of one shared counter set, or the leaves of one seed root instance.
type v1lgroup struct {
	members []int32 // local devices
	seed    bool
	// fresh0: nothing of the group is in use; the first pick from a fresh
	// group of several devices breaks up a whole physical device.
	fresh0 bool
	sig    int32 // the class of the set (members, counters) or seed root (leaves), for symmetry, else -1
	// ctrs are a counter group's counters (local), at ctrOff in the
	// search's per-counter scratch.
	ctrs   []int32
	ctrOff int32
}

// buildGroups finds the groups of the node's devices and the symmetry
// signatures: msig of a device that can be swapped with another of equal
// msig (independent devices, consumers of exactly one counter set, leaves
// of one partition group of a seed instance), and the class of each
// counter set and seed root. kinds is the number of
// alternatives; beyond 64 there is no symmetry (kinds are a 64-bit mask).
func (p *v1prob) buildGroups(kinds int) {
	inv := p.inv
	n := len(p.devs)
	// The node's groups get local indexes in the order their first member
	// comes (index: the local index of each inventory group in [gmin,
	// gmax], -1 when not seen yet); one buffer backs the devices' group
	// lists (devGroups) and the groups' members, each group with room for
	// all of the inventory group's.
	memberships, gmin, gmax := 0, int32(math.MaxInt32), int32(-1)
	for _, x := range p.devs {
		for _, g := range inv.devs[x].groups {
			memberships++
			gmin, gmax = min(gmin, g), max(gmax, g)
		}
	}
	p.devGroups = p.ar.lists.take(n)
	if memberships == 0 {
		p.buildSignatures(kinds)
		return
	}
	span := int(gmax-gmin) + 1
	var local map[int32]int32
	var index []int32
	if span > 4*memberships+64 {
		// Groups far apart in the inventory (devices of pools that reach
		// many nodes): a map, not a long index.
		local = make(map[int32]int32, memberships)
	}
	localOf := func(g int32) (int32, bool) {
		if local != nil {
			j, ok := local[g]
			return j, ok
		}
		j := index[g-gmin]
		return j, j >= 0
	}
	// Count the distinct groups and their room first, so that nothing
	// grows while members are added.
	if local == nil {
		index = p.ar.i32.take(span)
		for i := range index {
			index[i] = -1
		}
	}
	ngroups, room := int32(0), 0
	for _, x := range p.devs {
		for _, g := range inv.devs[x].groups {
			if _, ok := localOf(g); ok {
				continue
			}
			if local != nil {
				local[g] = ngroups
			} else {
				index[g-gmin] = ngroups
			}
			ngroups++
			room += len(inv.groups[g])
		}
	}
	p.lgroups = p.ar.groups.take(int(ngroups))
	for i := range p.lgroups {
		p.lgroups[i].sig = -1
	}
	buf := p.ar.i32.take(memberships + room)
	groupBuf, memberBuf := buf[:0:memberships], buf[memberships:memberships]
	seen := int32(0)
	for l, x := range p.devs {
		d := &inv.devs[x]
		if len(d.groups) == 0 {
			continue
		}
		start := len(groupBuf)
		for _, g := range d.groups {
			j, _ := localOf(g)
			lg := &p.lgroups[j]
			if j == seen {
				// First member: the group's room in memberBuf.
				seen++
				k := len(memberBuf)
				memberBuf = memberBuf[:k+len(inv.groups[g])]
				lg.members = memberBuf[k:k:len(memberBuf)]
				lg.seed, lg.fresh0 = g == d.seedGroup, true
			}
			lg.members = append(lg.members, int32(l))
			if p.inUse[l] || p.seedLock[l] {
				lg.fresh0 = false
			}
			for _, u := range p.uses[l] {
				if p.left0[u.Counter] != inv.ctrs[p.lctr[u.Counter]].Total {
					lg.fresh0 = false
				}
			}
			groupBuf = append(groupBuf, j)
		}
		p.devGroups[l] = groupBuf[start:len(groupBuf):len(groupBuf)]
	}
	p.buildSignatures(kinds)
}

// buildSignatures is the second half of buildGroups: the symmetry
// classes of the devices, seed roots and counter sets.
func (p *v1prob) buildSignatures(kinds int) {
	inv := p.inv
	// Signatures are interned: a short list (few classes in practice),
	// a map beyond.
	var list []string
	var sigs map[string]int32
	intern := func(key []byte) int32 {
		if sigs == nil {
			for i, k := range list {
				if k == string(key) {
					return int32(i)
				}
			}
			list = append(list, string(key))
			if len(list) > 32 {
				sigs = make(map[string]int32, 2*len(list))
				for i, k := range list {
					sigs[k] = int32(i)
				}
			}
			return int32(len(list) - 1)
		}
		s, ok := sigs[string(key)]
		if !ok {
			s = int32(len(sigs))
			sigs[string(key)] = s
		}
		return s
	}
	var key []byte
	for l, x := range p.devs {
		p.msig[l] = -1
		gs := p.devGroups[l]
		in := inv.devs[x].d.SeedInstance
		switch {
		case kinds > 64:
			continue
		case len(gs) == 0:
		case len(gs) == 1 && !p.lgroups[gs[0]].seed:
		case len(gs) == 1 && len(inv.groups[inv.devs[x].groups[0]]) == 1:
			in = "" // a seed root without partitions: independent
		case len(gs) == 1:
			// A leaf of a partitioned seed instance: its class includes
			// the partition group it is in (its ID without the root and
			// the leaf name); siblings of one class are interchangeable.
		default:
			continue
		}
		key = key[:0]
		if in != "" {
			_, rel, _ := strings.Cut(in, "/")
			parent, _, _ := cutLast(rel)
			key = append(append(key, parent...), 0)
		}
		key = strconv.AppendUint(key, p.kinds[l], 16)
		key = append(key, byte('0'+b2i(p.inUse[l])), byte('0'+b2i(p.seedLock[l])), byte('0'+b2i(p.free0[l])))
		for k := range p.cons {
			key = append(key, p.cons[k].vals[x]...)
			key = append(key, 0)
		}
		if d := &inv.devs[x]; d.multi {
			key = append(key, 'M')
			for i := range d.caps {
				key = append(key, d.caps[i].dc.String()...)
				key = strconv.AppendInt(append(key, '='), p.capLeft0[l][i], 10)
				key = append(key, 0)
			}
		}
		for _, u := range p.uses[l] {
			key = append(key, inv.ctrs[p.lctr[u.Counter]].Name...)
			key = strconv.AppendInt(append(key, '='), u.Amount, 10)
			key = append(key, 0)
		}
		p.msig[l] = intern(key)
	}
	for l := range p.devs {
		p.ctrGroup[l] = -1
		if gs := p.devGroups[l]; len(gs) == 1 && !p.lgroups[gs[0]].seed {
			p.ctrGroup[l] = gs[0]
		}
	}
	for j := range p.lgroups {
		lg := &p.lgroups[j]
		if lg.seed {
			continue
		}
		for _, m := range lg.members {
			for _, u := range p.uses[m] {
				if !slices.Contains(lg.ctrs, u.Counter) {
					lg.ctrs = append(lg.ctrs, u.Counter)
				}
			}
		}
		lg.ctrOff = int32(p.nGroupCtr)
		p.nGroupCtr += len(lg.ctrs)
	}
	// A seed root's class: its leaves, by their path under the root, and
	// their classes.
	type leaf struct {
		rel  string
		msig int32
	}
	var leaves []leaf
	for j := range p.lgroups {
		lg := &p.lgroups[j]
		if !lg.seed || len(lg.members) < 2 {
			continue
		}
		leaves = leaves[:0]
		for _, m := range lg.members {
			if p.msig[m] < 0 {
				leaves = nil
				break
			}
			_, rel, _ := strings.Cut(inv.devs[p.devs[m]].d.SeedInstance, "/")
			leaves = append(leaves, leaf{rel, p.msig[m]})
		}
		if leaves == nil {
			continue
		}
		slices.SortFunc(leaves, func(a, b leaf) int { return strings.Compare(a.rel, b.rel) })
		key = append(key[:0], 'S')
		for _, lf := range leaves {
			key = append(append(key, lf.rel...), 0)
			key = strconv.AppendInt(key, int64(lf.msig), 10)
			key = append(key, 0)
		}
		lg.sig = intern(key)
	}
	// A counter set's class: its members' msigs and its counters.
	var msBuf, ctrBuf []int32
	for j := range p.lgroups {
		lg := &p.lgroups[j]
		if lg.seed {
			continue
		}
		ms := msBuf[:0]
		ctrs := append(ctrBuf[:0], lg.ctrs...)
		ok := true
		for _, m := range lg.members {
			if p.msig[m] < 0 {
				ok = false
				break
			}
			ms = append(ms, p.msig[m])
		}
		if !ok {
			continue
		}
		slices.Sort(ms)
		slices.SortFunc(ctrs, func(a, b int32) int { return cmp.Compare(inv.ctrs[p.lctr[a]].Name, inv.ctrs[p.lctr[b]].Name) })
		key = append(key[:0], 'G')
		for _, m := range ms {
			key = strconv.AppendInt(append(key, ','), int64(m), 10)
		}
		for _, c := range ctrs {
			key = append(append(key, ';'), inv.ctrs[p.lctr[c]].Name...)
			key = strconv.AppendInt(append(key, '='), p.left0[c], 10)
			key = strconv.AppendInt(append(key, '/'), inv.ctrs[p.lctr[c]].Total, 10)
		}
		lg.sig = intern(key)
		msBuf, ctrBuf = ms, ctrs
	}
}
