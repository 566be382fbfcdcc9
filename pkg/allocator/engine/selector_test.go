package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"allot.dev/allot/pkg/allocator/celenv"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func dselStr(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
func dselInt(i int64) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{IntValue: &i} }
func dselBool(b bool) resourcev1.DeviceAttribute  { return resourcev1.DeviceAttribute{BoolValue: &b} }
func dselVer(v string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{VersionValue: &v}
}
func dselCap(q string) resourcev1.DeviceCapacity {
	return resourcev1.DeviceCapacity{Value: resource.MustParse(q)}
}
func dselInts(is ...int64) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{IntValues: is}
}

// dselSampleDevice is a GPU as upstream's examples describe one: attributes
// in the driver's domain written both bare and qualified, attributes of
// other domains, capacities.
func dselSampleDevice() DeviceSelectorInput {
	return DeviceSelectorInput{
		Driver: "gpu.example.com",
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"model":                           dselStr("LATEST-GPU-MODEL"),
			"driverVersion":                   dselVer("1.2.3"),
			"runtimeVersion":                  dselVer("12.0.0-rc.1+build.5"),
			"index":                           dselInt(3),
			"ecc":                             dselBool(true),
			"gpu.example.com/family":          dselStr("A"),
			"resource.kubernetes.io/pcieRoot": dselStr("pci0000:00"),
			"other.example.org/numa":          dselInt(1),
			"other.example.org/numaList":      dselInts(0, 1),
			"other.example.org/badVersion":    dselVer("v1"),
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			"memory":                      dselCap("80Gi"),
			"gpu.example.com/cores":       dselCap("108"),
			"other.example.org/bandwidth": dselCap("100G"),
		},
	}
}

func TestDeviceSelectorLimitsAreUpstreams(t *testing.T) {
	if MaxDeviceSelectorLength != resourcev1.CELSelectorExpressionMaxLength {
		t.Errorf("MaxDeviceSelectorLength = %d, upstream %d", MaxDeviceSelectorLength, resourcev1.CELSelectorExpressionMaxLength)
	}
	if DeviceSelectorCostLimit != resourcev1.CELSelectorExpressionMaxCost {
		t.Errorf("DeviceSelectorCostLimit = %d, upstream %d", DeviceSelectorCostLimit, resourcev1.CELSelectorExpressionMaxCost)
	}
}

// nestedLoops is n comprehensions over a list of size elements, nested.
func nestedLoops(n, size int) string {
	elems := make([]string, size)
	for i := range elems {
		elems[i] = fmt.Sprint(i)
	}
	list := "[" + strings.Join(elems, ",") + "]"
	expr := "true"
	for i := range n {
		expr = fmt.Sprintf("%s.all(x%d, %s)", list, i, expr)
	}
	return expr
}

// TestCompileDeviceSelectorGenerated: the cases of
// testdata/scenarios/v1-selectors.txt too long to write there.
func TestCompileDeviceSelectorGenerated(t *testing.T) {
	for _, tc := range []struct {
		name, expr, err string
	}{
		{"too long", strings.Repeat(" ", MaxDeviceSelectorLength-3) + "true", "more than the limit of 10240"},
		{"cost estimate over the limit", nestedLoops(3, 150), "exceeds the limit of 1000000"},
	} {
		err := CompileDeviceSelector(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, celenv.ErrInvalidSelector) {
			t.Errorf("%s: %v, want celenv.ErrInvalidSelector with %q", tc.name, err, tc.err)
		}
	}
}

// TestCompileDeviceSelectorAtTheLengthLimit accepts a selector of exactly
// MaxDeviceSelectorLength bytes.
func TestCompileDeviceSelectorAtTheLengthLimit(t *testing.T) {
	expr := strings.Repeat(" ", MaxDeviceSelectorLength-4) + "true"
	if err := CompileDeviceSelector(expr); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceSelectorCostEstimateBelowTheLimit checks that selectors that
// stay within the runtime limit on every API-valid device are not refused.
func TestDeviceSelectorCostEstimateBelowTheLimit(t *testing.T) {
	for _, expr := range []string{
		nestedLoops(2, 150),
		`device.attributes.all(d, device.attributes[d].all(k, k.size() < 100))`,
		`device.capacity.exists(d, device.capacity[d].exists(k, device.capacity[d][k].isGreaterThan(quantity("1"))))`,
	} {
		if err := CompileDeviceSelector(expr); err != nil {
			t.Errorf("CompileDeviceSelector(%.100s): %v", expr, err)
		}
	}
}

// TestMatchDeviceSelectorConcurrent evaluates one selector against many
// devices from many goroutines (for the race detector: inputs are pooled).
func TestMatchDeviceSelectorConcurrent(t *testing.T) {
	const expr = `device.attributes["gpu.example.com"].index % 2 == 0 && device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1Gi"))`
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				idx := int64(g*1000 + i)
				d := DeviceSelectorInput{
					Driver:     "gpu.example.com",
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"index": dselInt(idx)},
					Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": dselCap("2Gi")},
				}
				got, err := MatchDeviceSelector(expr, d)
				if err != nil || got != (idx%2 == 0) {
					t.Errorf("device %d: got %v, %v", idx, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDeviceSelectorCacheIsBounded(t *testing.T) {
	c := newDselCache()
	for i := range dselCacheSize + 10 {
		c.add(fmt.Sprint(i), &dselCacheEntry{})
		if i == 5 {
			c.get("0") // recently read entries survive the next sweep
		}
	}
	if n := len(c.m); n > dselCacheSize {
		t.Fatalf("cache holds %d entries, more than %d", n, dselCacheSize)
	}
	if _, ok := c.get(fmt.Sprint(dselCacheSize + 9)); !ok {
		t.Fatal("the newest entry is missing")
	}
}

func BenchmarkMatchDeviceSelector(b *testing.B) {
	dev := dselSampleDevice()
	for _, bc := range []struct{ name, expr string }{
		{"driver", `device.driver == "gpu.example.com"`},
		{"attribute", `device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"`},
		{"qualified attribute", `device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"`},
		{"quantity", `device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`},
		{"semver", `device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))`},
		{"typical", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if ok, err := MatchDeviceSelector(bc.expr, dev); !ok || err != nil {
				b.Fatalf("got %v, %v", ok, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MatchDeviceSelector(bc.expr, dev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSelectorCompilationConcurrent: selectors compile in parallel (the
// API server validates requests concurrently); an undeclared name and a
// comprehension compiled at the same time must not race inside cel-go
// (warmCELChecker). Run with -race.
func TestSelectorCompilationConcurrent(t *testing.T) {
	exprs := []string{`undeclared_name == 1`, `device.attributes["gpu.example.com"].exists(k, k == "model")`,
		`[1, 2].all(x, x > 0)`, `other_undeclared`}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_ = CompileDeviceSelector(exprs[(g+i)%len(exprs)])
			}
		}()
	}
	wg.Wait()
}
