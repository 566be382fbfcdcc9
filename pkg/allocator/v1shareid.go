package allocator

import (
	"crypto/sha1"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// shareKey is a device as a share ID names it: driver, pool and device
// name.
func shareKey(driver, pool, device string) string {
	return driver + "\x00" + pool + "\x00" + device
}

// v1ShareID names one share: a UUID (version 5 layout, SHA-1) of the
// claim (its UID, else namespace/name), the request and the device.
// Upstream draws a random UUID; this one is derived so that equal inputs
// give equal outputs. It is unique where it must be: shares of one
// device come from different claims or, within a claim, from different
// requests (a request takes a device once).
func v1ShareID(c *resourcev1.ResourceClaim, request, deviceKey string) types.UID {
	h := sha1.New()
	id := string(c.UID)
	if id == "" {
		id = c.Namespace + "/" + c.Name
	}
	for _, part := range []string{"allot.dev/share", id, request, deviceKey} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]))
}

// RederiveShareIDs sets the shareID of every share in an allocation
// (results that have one) to the one AllocateV1 gives that share in
// claim. A caller that hands an allocation computed for one claim to
// another (an answer reused for a pod of the same shape) calls it on the
// copy, so that two claims never carry one share ID of a device.
func RederiveShareIDs(claim *resourcev1.ResourceClaim, a *resourcev1.AllocationResult) {
	if claim == nil || a == nil {
		return
	}
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.ShareID != nil {
			r.ShareID = ptr(v1ShareID(claim, r.Request, shareKey(r.Driver, r.Pool, r.Device)))
		}
	}
}
