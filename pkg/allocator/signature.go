package allocator

import (
	"encoding/binary"
	"slices"
)

// Signatures make the search aware of symmetry. Every subtree of the
// current state gets a small integer that is equal for two subtrees exactly
// when they are interchangeable for the rest of the search: same shape,
// same partition locks, and leaves that match the same requests. Two
// candidate leaves reached by equal signatures at every step from the root
// are images of each other under an automorphism of the node, so only the
// first needs to be tried. Interning (not hashing) keeps this exact.
//
// Capacity and per-request candidate counts depend only on the signature,
// so they are computed once per signature and reused.

const (
	sigDead  byte = iota // nothing in the subtree can be allocated any more
	sigLeaf              // an allocatable leaf; mask says which kinds it matches
	sigGroup             // a partition group; kids are its instances' sigs
	sigFixed             // an instance locked to one group; kids = [that group]
	sigFree              // an instance with no group chosen yet; kids = its groups
)

type sigInfo struct {
	kind   byte
	mask   uint64
	kids   []int32 // sorted
	cap    int32   // leaves usable at the same time
	counts []int32 // per kind: free leaves matching it
}

type sigTable struct {
	kinds int
	ids   map[string]int32
	info  []sigInfo
	capR  map[capKey]int32
	buf   []byte
}

type capKey struct {
	sig  int32
	mask uint64
}

const deadSig int32 = 0

// newSigTable returns a table for a search with the given number of kinds,
// sized for about hint signatures.
func newSigTable(kinds, hint int) *sigTable {
	t := &sigTable{kinds: kinds, ids: make(map[string]int32, hint/2+1), info: make([]sigInfo, 0, hint/2+1)}
	t.intern(sigDead, 0, nil) // id 0
	return t
}

// intern returns the id of the signature (kind, mask, kids); kids must be
// sorted by the caller where order does not matter.
func (t *sigTable) intern(kind byte, mask uint64, kids []int32) int32 {
	b := append(t.buf[:0], kind)
	b = binary.LittleEndian.AppendUint64(b, mask)
	for _, k := range kids {
		b = binary.LittleEndian.AppendUint32(b, uint32(k))
	}
	t.buf = b
	if id, ok := t.ids[string(b)]; ok {
		return id
	}
	id := int32(len(t.info))
	t.ids[string(b)] = id
	info := sigInfo{kind: kind, mask: mask, counts: make([]int32, t.kinds)}
	if len(kids) > 0 {
		info.kids = slices.Clone(kids)
	}
	switch kind {
	case sigLeaf:
		info.cap = 1
		for k := range t.kinds {
			if mask&(1<<k) != 0 {
				info.counts[k] = 1
			}
		}
	case sigGroup, sigFixed:
		for _, c := range kids {
			info.cap += t.info[c].cap
			addCounts(info.counts, t.info[c].counts)
		}
	case sigFree:
		for _, c := range kids {
			info.cap = max(info.cap, t.info[c].cap)
			addCounts(info.counts, t.info[c].counts)
		}
	}
	t.info = append(t.info, info)
	return id
}

func addCounts(dst, src []int32) {
	for i, v := range src {
		dst[i] += v
	}
}

// capacity returns how many leaves matching any kind in mask can be
// allocated at the same time inside the subtree.
func (t *sigTable) capacity(sig int32, mask uint64) int32 {
	info := &t.info[sig]
	switch info.kind {
	case sigDead:
		return 0
	case sigLeaf:
		if info.mask&mask != 0 {
			return 1
		}
		return 0
	}
	key := capKey{sig: sig, mask: mask}
	if v, ok := t.capR[key]; ok {
		return v
	}
	if t.capR == nil {
		t.capR = map[capKey]int32{}
	}
	var c int32
	for _, k := range info.kids {
		v := t.capacity(k, mask)
		if info.kind == sigFree {
			c = max(c, v)
		} else {
			c += v
		}
	}
	t.capR[key] = c
	return c
}

// instSig computes the signature of instance x from the current
// signatures of its groups (gsig), which the caller keeps up to date.
func (s *solver) instSig(x int32) int32 {
	in := &s.dm.insts[x]
	if !in.ok || s.used[x] > 0 {
		return deadSig
	}
	if in.leaf >= 0 {
		return s.sigs.intern(sigLeaf, s.masks[in.leaf], nil)
	}
	locked, nLocked := int32(-1), 0
	gsigs := s.scratch[:0]
	for _, g := range in.groups {
		if s.lock[g] > 0 {
			locked, nLocked = g, nLocked+1
		}
		gsigs = append(gsigs, s.gsig[g])
	}
	s.scratch = gsigs
	switch nLocked {
	case 0:
		slices.Sort(gsigs)
		return s.sigs.intern(sigFree, 0, gsigs)
	case 1:
		return s.sigs.intern(sigFixed, 0, append(gsigs[:0], s.gsig[locked]))
	}
	return deadSig // two schemes in use at once: stale state, allocate nothing more here
}

// groupSig computes the signature of group g from its instances' current
// signatures.
func (s *solver) groupSig(g int32) int32 {
	kids := s.scratch[:0]
	for _, c := range s.dm.groups[g].children {
		kids = append(kids, s.sig[c])
	}
	slices.Sort(kids)
	s.scratch = kids
	return s.sigs.intern(sigGroup, 0, kids)
}
