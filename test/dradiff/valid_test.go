package dradiff

import (
	"fmt"
	"testing"

	"allot.dev/allot/api/validation"
)

// TestGeneratorValid checks that the generator makes only objects the API
// server accepts (allot's validation of resource.k8s.io/v1, with the
// selectors compiled by upstream's CEL package), so that the differential
// test is about allocation, not about input that could never be stored.
func TestGeneratorValid(t *testing.T) {
	validation.SetDeviceSelectorCompiler(func(expr string) error {
		if r := celCache.GetOrCompile(expr); r.Error != nil {
			return fmt.Errorf("%v", r.Error)
		}
		return nil
	})
	t.Cleanup(func() { validation.SetDeviceSelectorCompiler(nil) })
	n := min(*flagCases, 500)
	for i := range n {
		c := genCase(*flagSeed, i)
		for _, o := range c.Classes {
			for _, e := range validation.ValidateDeviceClass(o) {
				t.Errorf("case %d class %s: %v", i, o.Name, e)
			}
		}
		for _, o := range c.Slices {
			for _, e := range validation.ValidateResourceSlice(o) {
				t.Errorf("case %d slice %s: %v", i, o.Name, e)
			}
		}
		for _, o := range c.Claims {
			for _, e := range validation.ValidateResourceClaimV1(o) {
				t.Errorf("case %d claim %s: %v", i, o.Name, e)
			}
		}
		if t.Failed() {
			t.Fatalf("case %d:\n%s", i, c.YAML())
		}
	}
}
