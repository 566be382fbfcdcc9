package engine

import "testing"

// TestLookupAndCanon pins the inventory's device index against the rule
// it replaced, "the first device of the inventory with a driver, pool
// and name": across pools of one driver and name (a v1 pool and the seed
// projection that clashes with it), with names repeated inside a pool,
// for names in and out of the inventory. The state counts a repeated
// name once, on the first device (canon).
func TestLookupAndCanon(t *testing.T) {
	dev := func(names ...string) []Device {
		var out []Device
		for _, n := range names {
			out = append(out, Device{Name: n, NodeName: "n"})
		}
		return out
	}
	inv := NewInventory([]Pool{
		{Driver: "b", Name: "p", Devices: dev("z", "a", "a")},
		{Driver: "a", Name: "p", Devices: dev("x", "y")},
		{Driver: "b", Name: "p", Devices: dev("a", "c", "z")}, // a clash: after the first pool b/p (stable sort)
		{Driver: "b", Name: "q", Devices: dev("c")},
		{Driver: "b", Name: "empty"},
	}, nil)
	first := map[string]int32{}
	for x := range inv.Len() {
		p, d := inv.At(int32(x))
		k := p.Driver + "/" + p.Name + "/" + d.Name
		if _, seen := first[k]; !seen {
			first[k] = int32(x)
		}
		if got, want := inv.devs[x].canon, first[k]; got != want {
			t.Errorf("device %d (%s): canon %d, want %d", x, k, got, want)
		}
	}
	for _, driver := range []string{"a", "b", "c"} {
		for _, pool := range []string{"p", "q", "empty", "r"} {
			for _, name := range []string{"a", "c", "x", "y", "z", "w"} {
				k := driver + "/" + pool + "/" + name
				want, wantOK := first[k]
				got, ok := inv.Lookup(driver, pool, name)
				if ok != wantOK || (ok && got != want) {
					t.Errorf("Lookup(%s) = %d, %v; want %d, %v", k, got, ok, want, wantOK)
				}
			}
		}
	}
	// The state counts a device by its first index, whichever name
	// lookup resolves it from, and a device the inventory lacks on the
	// side.
	st := NewState(inv)
	st.Use(DeviceUse{Driver: "b", Pool: "p", Device: "a"}, 1)
	st.Use(DeviceUse{Driver: "b", Pool: "p", Device: "gone"}, 1)
	st.Fold()
	for _, c := range []struct {
		dev  string
		want bool
	}{{"a", true}, {"gone", true}, {"z", false}, {"c", false}} {
		if got := st.InUse("b", "p", c.dev); got != c.want {
			t.Errorf("InUse(b/p/%s) = %v, want %v", c.dev, got, c.want)
		}
	}
	next := st.Edit()
	next.Use(DeviceUse{Driver: "b", Pool: "p", Device: "gone"}, -1)
	next.Use(DeviceUse{Driver: "b", Pool: "p", Device: "gone"}, -1) // not counted any more: ignored
	if next.InUse("b", "p", "gone") || !st.InUse("b", "p", "gone") {
		t.Errorf("removing the use of an unknown device: derived %v, parent %v; want false, true",
			next.InUse("b", "p", "gone"), st.InUse("b", "p", "gone"))
	}
}
