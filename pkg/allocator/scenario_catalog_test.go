package allocator_test

// Scenario commands for the seed Catalog: resolve, claim-parameters,
// class-parameters.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/allocator"
)

// catalog is NewCatalog over the world's classes, parameters and vendor
// objects, in the order given.
func (w *world) catalog() *allocator.Catalog {
	return allocator.NewCatalog(&allocator.Snapshot{
		Classes:          all[*resourceapi.ResourceClass](w),
		ClaimParameters:  all[*resourceapi.ResourceClaimParameters](w),
		ClassParameters:  all[*resourceapi.ResourceClassParameters](w),
		VendorParameters: all[*unstructured.Unstructured](w),
	})
}

// cmdResolve: resolve claims=(a, b): what Catalog.Resolve finds for each
// v1alpha2 claim, then what is missing, in order.
func (w *world) cmdResolve(t *testing.T, d *datadriven.TestData) string {
	w.cmdObjects(t, d)
	cat := w.catalog()
	var b strings.Builder
	for _, key := range claimKeys(t, d) {
		c, missing := cat.Resolve(w.seedClaim(t, d, key))
		fmt.Fprintf(&b, "%s:\n", key)
		if c.Class != nil {
			fmt.Fprintf(&b, "  class %s\n", c.Class.Name)
		}
		if c.ClaimParameters != nil {
			fmt.Fprintf(&b, "  claim parameters %s/%s\n", c.ClaimParameters.Namespace, c.ClaimParameters.Name)
		}
		if c.ClassParameters != nil {
			fmt.Fprintf(&b, "  class parameters %s/%s\n", c.ClassParameters.Namespace, c.ClassParameters.Name)
		}
		writeVendor(t, &b, "  vendor claim parameters", c.VendorClaimParameters)
		writeVendor(t, &b, "  vendor class parameters", c.VendorClassParameters)
		for _, m := range missing {
			fmt.Fprintf(&b, "  missing %s: class %q, reference %q %q\n", missingKinds[m.Kind], m.Class, m.RefKind, m.RefName)
			if m.Claim != key {
				t.Errorf("%s: missing names claim %q, want %q", d.Pos, m.Claim, key)
			}
		}
	}
	return b.String()
}

var missingKinds = map[allocator.MissingKind]string{
	allocator.MissingClass:           "class",
	allocator.MissingClaimParameters: "claim parameters",
	allocator.MissingClassParameters: "class parameters",
}

// writeVendor prints a vendor snapshot's JSON with sorted keys.
func writeVendor(t *testing.T, b *strings.Builder, label string, raw *runtime.RawExtension) {
	if raw == nil {
		return
	}
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "%s %s\n", label, j)
}

// cmdClaimParameters: claim-parameters namespace=NS [group=G] kind=K
// name=N: the ResourceClaimParameters Catalog.ClaimParameters finds for
// the reference in the namespace, and the vendor object's JSON.
func (w *world) cmdClaimParameters(t *testing.T, d *datadriven.TestData) string {
	ref := &resourceapi.ResourceClaimParametersReference{APIGroup: stringArg(d, "group", ""),
		Kind: stringArg(d, "kind", ""), Name: stringArg(d, "name", "")}
	p, raw := w.catalog().ClaimParameters(stringArg(d, "namespace", "default"), ref)
	var b strings.Builder
	if p == nil {
		b.WriteString("none\n")
	} else {
		fmt.Fprintf(&b, "%s/%s\n", p.Namespace, p.Name)
	}
	writeVendor(t, &b, "vendor", raw)
	return b.String()
}

// cmdClassParameters: class-parameters [group=G] kind=K name=N
// [namespace=NS]: likewise with Catalog.ClassParameters.
func (w *world) cmdClassParameters(t *testing.T, d *datadriven.TestData) string {
	ref := &resourceapi.ResourceClassParametersReference{APIGroup: stringArg(d, "group", ""),
		Kind: stringArg(d, "kind", ""), Name: stringArg(d, "name", ""), Namespace: stringArg(d, "namespace", "")}
	p, raw := w.catalog().ClassParameters(ref)
	var b strings.Builder
	if p == nil {
		b.WriteString("none\n")
	} else {
		fmt.Fprintf(&b, "%s/%s\n", p.Namespace, p.Name)
	}
	writeVendor(t, &b, "vendor", raw)
	return b.String()
}
