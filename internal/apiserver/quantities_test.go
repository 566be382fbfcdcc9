package apiserver

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// A quantity is stored as written or refused with 422 naming its field:
// 1e26 written without an exponent used to be stored as 100, and
// 99999999999999999999999Ti as 2^63-1, in a slice's capacity, shared
// counters and consumed counters and in a quota's spec.hard.
func TestQuantitiesStoredAsWrittenOrRefused(t *testing.T) {
	const slices = "/apis/resource.k8s.io/v1/resourceslices"
	n := 0
	// counterSlice publishes a counter set; deviceSlice a device with a
	// capacity, consuming from it (they are separate slices of a pool).
	counterSlice := func(value string) (string, string) {
		n++
		name := fmt.Sprintf("qty-counters-%d", n)
		return name, fmt.Sprintf(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":%q},
			"spec":{"driver":"gpu.example.com","nodeName":"qty-node","pool":{"name":"qty-%d","generation":1,"resourceSliceCount":2},
			"sharedCounters":[{"name":"set","counters":{"memory":{"value":%q}}}]}}`, name, n, value)
	}
	deviceSlice := func(capacity, consumed string) (string, string) {
		n++
		name := fmt.Sprintf("qty-devices-%d", n)
		return name, fmt.Sprintf(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":%q},
			"spec":{"driver":"gpu.example.com","nodeName":"qty-node","pool":{"name":"qty-%d","generation":1,"resourceSliceCount":2},
			"devices":[{"name":"gpu-0","capacity":{"memory":{"value":%q}},
				"consumesCounters":[{"counterSet":"set","counters":{"memory":{"value":%q}}}]}]}}`, name, n, capacity, consumed)
	}
	const (
		capField      = "spec.devices[0].capacity[memory].value"
		consumedField = "spec.devices[0].consumesCounters[0].counters[memory].value"
		sharedField   = "spec.sharedCounters[0].counters[memory].value"
	)
	for _, bad := range []string{"100000000000000000000000000", "99999999999999999999999Ti", "-99999999999999999999999Ti", "8Ei", "0.0000000001", "1.5n",
		"1e1001", "0E4444440", "1e-99999999", "1." + strings.Repeat("0", 1100)} {
		t.Run(bad, func(t *testing.T) {
			_, body := counterSlice(bad)
			r := admin(t, "POST", slices, body)
			expect(t, r, 422, sharedField)
			_, body = deviceSlice(bad, "1")
			expect(t, admin(t, "POST", slices, body), 422, capField)
			_, body = deviceSlice("1", bad)
			expect(t, admin(t, "POST", slices, body), 422, consumedField)

			ns := newNamespace(t)
			quota := fmt.Sprintf(`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"requests.memory":%q}}}`, bad)
			expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 422, "spec.hard[requests.memory]")
		})
	}
	// Large amounts written so that their text survives are kept exactly.
	for _, good := range []string{"1e26", "1e400", "100e24", "7Ei", "9223372036854775806", "123456789012345678901234567890e3"} {
		t.Run(good, func(t *testing.T) {
			want := resource.MustParse(good)
			name, body := counterSlice(good)
			expect(t, admin(t, "POST", slices, body), 201)
			var s resourcev1.ResourceSlice
			admin(t, "GET", slices+"/"+name, nil).into(t, &s)
			if got := s.Spec.SharedCounters[0].Counters["memory"].Value; got.Cmp(want) != 0 {
				t.Errorf("shared counter %s stored as %s", good, got.String())
			}
			name, body = deviceSlice(good, good)
			expect(t, admin(t, "POST", slices, body), 201)
			admin(t, "GET", slices+"/"+name, nil).into(t, &s)
			if got := s.Spec.Devices[0].Capacity["memory"].Value; got.Cmp(want) != 0 {
				t.Errorf("capacity %s stored as %s", good, got.String())
			}
			if got := s.Spec.Devices[0].ConsumesCounters[0].Counters["memory"].Value; got.Cmp(want) != 0 {
				t.Errorf("consumed counter %s stored as %s", good, got.String())
			}
		})
	}
	// A quota's amounts stay within what allot counts (2^63-1), and are
	// kept as written.
	ns := newNamespace(t)
	quota := `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"requests.memory":"7Ei"}}}`
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 201)
	var q corev1.ResourceQuota
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/resourcequotas/q", nil).into(t, &q)
	if got := q.Spec.Hard["requests.memory"]; got.Cmp(resource.MustParse("7Ei")) != 0 || !strings.HasSuffix(got.String(), "Ei") {
		t.Errorf("quota 7Ei stored as %s", got.String())
	}
}
