package allocator

import (
	"context"
	"strconv"
	"strings"

	"allot.dev/allot/pkg/allocator/engine"
)

// The seed front end of the one search: a driver's part of a seed
// Request on one node becomes a v1prob over the driver's leaves (local
// device l is leaf l of the driverModel, in listing order) with one
// request per kind (count: the items of that kind, of all claims), and
// the seed policy (seedView, the search's policy): the next request is the kind with the
// fewest free candidates, candidates are tried best fit first (the
// fewest leaves lost to the node's capacity, then inside groups already
// split, then listing order), and the first solution is the answer. That
// is the order seed 002's allocator searched in, so the answers are the
// same leaves.

// maxKinds is the number of distinct predicates one pod may use for one
// driver (kinds are kept in a 64-bit mask).
const maxKinds = 64

// failure says why the search found nothing: when mask is set, the
// requests of those kinds (need) exceed the capacity for them; otherwise
// the search was exhausted.
type failure struct {
	mask     uint64
	need     int32
	capacity int32
}

// seedLayout is what the seed front end needs of a driverModel beyond
// the tree, computed once per model.
type seedLayout struct {
	rootOf     []int32    // per leaf: its root's position in roots
	rootLeaves [][]int32  // per root: its leaves, in listing order
	parent     []int32    // per leaf: its partition group's path below the root, interned (0: a root)
	span       [][2]int32 // per partition group: its leaves, an index range (leaves are listed depth first)
	rel        []int32    // per leaf: its path below the root, interned
}

// layout returns dm's seedLayout.
func (dm *driverModel) layout() *seedLayout {
	if l := dm.seed.Load(); l != nil {
		return l
	}
	n := len(dm.leaves)
	lo := &seedLayout{rootOf: make([]int32, n), rootLeaves: make([][]int32, len(dm.roots)),
		parent: make([]int32, n), rel: make([]int32, n), span: make([][2]int32, len(dm.groups))}
	for g := range lo.span {
		lo.span[g] = [2]int32{int32(n), 0}
	}
	rootPos := make(map[int32]int32, len(dm.roots))
	for j, r := range dm.roots {
		rootPos[r] = int32(j)
	}
	paths := map[string]int32{"": 0}
	intern := func(s string) int32 {
		id, ok := paths[s]
		if !ok {
			id = int32(len(paths))
			paths[s] = id
		}
		return id
	}
	for l, x := range dm.leaves {
		in := &dm.insts[x]
		j := rootPos[in.root]
		lo.rootOf[l] = j
		lo.rootLeaves[j] = append(lo.rootLeaves[j], int32(l))
		_, rel, _ := strings.Cut(in.id, "/")
		parent := rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			parent = rel[:i]
		}
		lo.rel[l], lo.parent[l] = intern(rel), intern(parent)
		for g := in.parent; g >= 0; g = dm.insts[dm.groups[g].owner].parent {
			lo.span[g][0], lo.span[g][1] = min(lo.span[g][0], int32(l)), max(lo.span[g][1], int32(l)+1)
		}
	}
	dm.seed.CompareAndSwap(nil, lo)
	return dm.seed.Load()
}

// seedView is the seed policy's state of one search: the driver's tree
// with the node's and the search's allocations, to rate candidates by
// the capacity they take.
type seedView struct {
	dm    *driverModel
	lo    *seedLayout
	st    driverState // the node's state plus the search's picks
	roots []int32     // per root: its capacity now
	// blk counts per leaf the groups the search's picks lock that
	// exclude it (another group of an instance on its path): the
	// partition scheme constraint, the seed's stand-in for v1search's
	// conflict edges, which would be quadratic in a root's leaves.
	blk []int32
}

var _ engine.Policy = (*seedView)(nil)

// Place allocates (sign 1) or frees (sign -1) leaf l.
func (v *seedView) Place(l int32, sign int32) {
	v.mark(l, sign, true)
	r := v.lo.rootOf[l]
	v.roots[r] = int32(v.dm.instCapacity(&v.st, v.dm.roots[r], nil, 0))
}

// Blocked is blk: a leaf is allocatable while no pick excludes it (what
// the node's allocations leave is the table's Free).
func (v *seedView) Blocked() []int32 { return v.blk }

// mark counts leaf l in use (sign 1) or no more (sign -1), and the
// groups on its path, without updating the root's capacity; with blk,
// also the leaves a group's first (or last) lock excludes.
func (v *seedView) mark(l int32, sign int32, blk bool) {
	x := v.dm.leaves[l]
	v.st.used[x] += sign
	for g := v.dm.insts[x].parent; g >= 0; g = v.dm.insts[v.dm.groups[g].owner].parent {
		v.st.lock[g] += sign
		if !blk || v.st.lock[g] != max(sign, 0) {
			continue
		}
		for _, other := range v.dm.insts[v.dm.groups[g].owner].groups {
			if other == g {
				continue
			}
			sp := v.lo.span[other]
			for y := sp[0]; y < sp[1]; y++ {
				v.blk[y] += sign
			}
		}
	}
}

// Cost rates leaf l as seed 002's allocator did: the leaves of the node
// that can no longer be allocated at the same time once l is (lost),
// then, among equal losses, the more partition groups on its path already
// in use the better.
func (v *seedView) Cost(l int32) (lost int32, cost int64) {
	x := v.dm.leaves[l]
	pack := 0
	for g := v.dm.insts[x].parent; g >= 0; g = v.dm.insts[v.dm.groups[g].owner].parent {
		if v.st.lock[g] > 0 {
			pack++
		}
	}
	r := v.lo.rootOf[l]
	v.mark(l, 1, false)
	after := int32(v.dm.instCapacity(&v.st, v.dm.roots[r], nil, 0))
	v.mark(l, -1, false)
	lost = v.roots[r] - after
	return lost, int64(lost)<<8 - int64(pack)
}

// seedSearch finds leaves for the items of one driver of a seed request
// on a node: assign holds the instance of each item (kindOf gives the
// items' kinds) and lost the capacity they take. Without a solution f
// says why: the counting bound that failed, else an exhausted search.
// exhaustive turns off every pruning (the bound, symmetry, subsets,
// forward checking): a plain backtracking search that tests compare
// against, which must give the same answer.
func seedSearch(ctx context.Context, dm *driverModel, ds *driverState, masks []uint64, kindOf []int, nKinds int, exhaustive bool) (assign []int32, lost int, f *failure, err error) {
	count := make([]int, nKinds)
	for _, k := range kindOf {
		count[k]++
	}
	if !exhaustive {
		if f := seedBound(dm, ds, masks, count); f != nil {
			return nil, 0, f, nil
		}
	}
	t := dm.seedTable(ds, masks)
	defer t.Release()
	picks, lost, found, err := t.Search(ctx, newSeedView(t, dm, ds), count, exhaustive)
	if err != nil {
		return nil, 0, nil, err
	}
	if !found {
		return nil, 0, &failure{}, nil
	}
	// The j-th pick of a kind goes to its j-th item.
	assign = make([]int32, len(kindOf))
	next := make([]int, nKinds)
	for j := range picks.Len() {
		k, l := picks.At(j)
		for next[k] < len(kindOf) && kindOf[next[k]] != k {
			next[k]++
		}
		assign[next[k]] = dm.leaves[l]
		next[k]++
	}
	return assign, lost, nil, nil
}

// seedBound is the counting bound (Hall's condition with partition
// capacity): for every set of kinds (all sets when there are at most
// four, else each kind and all of them together), the items of those
// kinds must not outnumber the leaves matching them that can be
// allocated at the same time.
func seedBound(dm *driverModel, ds *driverState, masks []uint64, count []int) *failure {
	var live []int
	for k, c := range count {
		if c > 0 {
			live = append(live, k)
		}
	}
	var sets []uint64
	if len(live) <= 4 {
		for sub := 1; sub < 1<<len(live); sub++ {
			var m uint64
			for i, k := range live {
				if sub&(1<<i) != 0 {
					m |= 1 << k
				}
			}
			sets = append(sets, m)
		}
	} else {
		var all uint64
		for _, k := range live {
			sets = append(sets, 1<<k)
			all |= 1 << k
		}
		sets = append(sets, all)
	}
	for _, m := range sets {
		need := 0
		for k, c := range count {
			if m&(1<<k) != 0 {
				need += c
			}
		}
		if capacity := dm.capacityOf(ds, masks, m); capacity < need {
			return &failure{mask: m, need: int32(need), capacity: int32(capacity)}
		}
	}
	return nil
}

// newSeedView returns the seed policy's view of a search of table t
// over dm's leaves in state ds (nil: nothing in use).
func newSeedView(t engine.Table, dm *driverModel, ds *driverState) *seedView {
	v := &seedView{dm: dm, lo: dm.layout(), roots: t.Int32s(len(dm.roots))}
	v.st.used = t.Int32s(len(dm.insts))
	v.st.lock = t.Int32s(len(dm.groups))
	if ds != nil {
		copy(v.st.used, ds.used)
		copy(v.st.lock, ds.lock)
	}
	for j, r := range dm.roots {
		v.roots[j] = int32(dm.instCapacity(&v.st, r, nil, 0))
	}
	v.blk = t.Int32s(len(dm.leaves))
	return v
}

// seedTable lays out the one search's problem of a driver's leaves in
// state ds: leaf l is device l, a candidate of the
// kinds it matches while free; one group per root (its leaves), each
// leaf's class (its partition group's path below the root, the kinds it
// matches, free or not), and the class of each root nothing of which is
// in use (its leaves' paths and classes).
func (dm *driverModel) seedTable(ds *driverState, masks []uint64) engine.Table {
	lo := dm.layout()
	n := len(dm.leaves)
	t := engine.NewTable(n)
	for l, x := range dm.leaves {
		if dm.free(ds, x) {
			t.Free(int32(l), masks[l])
		}
	}
	type leafKey struct {
		parent int32
		kinds  uint64
		free   bool
	}
	msig := t.Int32s(n)
	msigs := map[leafKey]int32{}
	for l := range n {
		k := leafKey{lo.parent[l], t.Kinds(int32(l)), t.IsFree(int32(l))}
		s, ok := msigs[k]
		if !ok {
			s = int32(len(msigs))
			msigs[k] = s
		}
		msig[l] = s
	}
	t.Classes(msig)
	var rootSigs map[string]int32
	var key []byte
	t.Groups(len(dm.roots), func(j int) ([]int32, bool, int32) {
		members := lo.rootLeaves[j]
		fresh := ds == nil || untouchedRoot(dm, ds, dm.roots[j])
		if !fresh || len(members) < 2 {
			return members, fresh, -1
		}
		// Leaves are listed in one order for equal trees.
		key = key[:0]
		for _, l := range members {
			key = strconv.AppendInt(key, int64(lo.rel[l]), 10)
			key = append(key, ':')
			key = strconv.AppendInt(key, int64(msig[l]), 10)
			key = append(key, ',')
		}
		if rootSigs == nil {
			rootSigs = map[string]int32{}
		}
		s, ok := rootSigs[string(key)]
		if !ok {
			s = int32(len(rootSigs))
			rootSigs[string(key)] = s
		}
		return members, fresh, s
	})
	return t
}

// untouchedRoot reports whether nothing below root r is in use or locked
// in ds.
func untouchedRoot(dm *driverModel, ds *driverState, r int32) bool {
	if ds.used[r] > 0 {
		return false
	}
	for _, g := range dm.insts[r].groups {
		if ds.lock[g] > 0 {
			return false
		}
		for _, c := range dm.groups[g].children {
			if !untouchedRoot(dm, ds, c) {
				return false
			}
		}
	}
	return true
}
