package kubeletplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"tags.cncf.io/container-device-interface/pkg/parser"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// ErrNotFound is wrapped by Prepare when an allocated instance does not
// exist (any more). The claim is answered with error_code NOT_FOUND, and
// the node agent re-reads the claim before it retries.
var ErrNotFound = errors.New("allocated resources not found")

// errInvalidClaim marks claims the node agent sent malformed; they are
// answered with INVALID_ARGUMENT without reaching the driver.
var errInvalidClaim = errors.New("invalid claim")

// Claim is one ResourceClaim as the node agent sent it.
type Claim struct {
	Namespace string
	Name      string
	UID       types.UID
	// ResourceHandle is the opaque data a control-plane controller put in
	// the allocation for this driver; empty for structured claims.
	ResourceHandle string
	// Structured is the structured allocation for this driver (the
	// allocated instances and the vendor parameters the scheduler used);
	// nil for claims allocated by a control-plane controller.
	Structured *resourcev1alpha2.StructuredResourceHandle
}

// String is NAMESPACE/NAME (UID), for logs and errors.
func (c Claim) String() string {
	return fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, c.UID)
}

// claimFromProto decodes a claim of a request.
func claimFromProto(pc *drapb.Claim) (Claim, error) {
	c := Claim{Namespace: pc.Namespace, Name: pc.Name, UID: types.UID(pc.Uid), ResourceHandle: pc.ResourceHandle}
	if pc.Uid == "" {
		return c, fmt.Errorf("%w: uid: required", errInvalidClaim)
	}
	if len(pc.StructuredResourceHandle) > 0 {
		var h resourcev1alpha2.StructuredResourceHandle
		if err := json.Unmarshal(pc.StructuredResourceHandle, &h); err != nil {
			return c, fmt.Errorf("%w %s: structured_resource_handle: not a StructuredResourceHandle in JSON: %w", errInvalidClaim, pc.Uid, err)
		}
		c.Structured = &h
	}
	return c, nil
}

// claimRef names one claim of a request, in either API. Allot's requests
// carry the allocation too (proto).
type claimRef struct {
	Namespace, Name, UID string
	proto                *drapb.Claim // APIAllot only
}

func refFromProto(pc *drapb.Claim) claimRef {
	return claimRef{Namespace: pc.Namespace, Name: pc.Name, UID: pc.Uid, proto: pc}
}

// claimResult is the outcome of one claim.
type claimResult struct {
	devices []string // CDI device names (APIAllot)
	// kubeletDevices are the prepared devices (APIKubelet).
	kubeletDevices []*drapbv1.Device
	err            error
}

// forEachClaim runs fn for every distinct claim UID of a request, at most
// Options.MaxConcurrentClaims at a time, each under its claim's lock, and
// returns the results by UID. A claim without a UID, and one whose fn
// panics, gets an error.
func (p *Plugin) forEachClaim(ctx context.Context, op string, claims []claimRef, fn func(context.Context, claimRef) (claimResult, error)) map[string]claimResult {
	results := make(map[string]claimResult, len(claims))
	var unique []claimRef
	for _, c := range claims {
		if _, dup := results[c.UID]; !dup {
			results[c.UID] = claimResult{}
			unique = append(unique, c)
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan claimRef)
	)
	workers := min(p.opts.MaxConcurrentClaims, len(unique))
	for range workers {
		wg.Go(func() {
			for c := range next {
				r := p.runClaim(ctx, op, c, fn)
				mu.Lock()
				results[c.UID] = r
				mu.Unlock()
			}
		})
	}
	for _, c := range unique {
		next <- c
	}
	close(next)
	wg.Wait()
	return results
}

// runClaim runs fn on one claim under the claim's lock, turning a panic
// into the claim's error.
func (p *Plugin) runClaim(ctx context.Context, op string, c claimRef, fn func(context.Context, claimRef) (claimResult, error)) (r claimResult) {
	name := fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, c.UID)
	if c.UID == "" {
		err := fmt.Errorf("%w: uid: required", errInvalidClaim)
		p.log.Warn(op+" claim rejected", "namespace", c.Namespace, "name", c.Name, "err", err)
		return claimResult{err: err}
	}
	unlock, err := p.locks.Lock(ctx, types.UID(c.UID))
	if err != nil {
		return claimResult{err: fmt.Errorf("wait for another call on claim %s: %w", c.UID, err)}
	}
	defer unlock()
	defer func() {
		if v := recover(); v != nil {
			p.log.Error(op+" panicked", "claim", name, "panic", v, "stack", string(debug.Stack()))
			r = claimResult{err: fmt.Errorf("%s claim %s: driver panicked: %v", op, c.UID, v)}
		}
	}()
	r, err = fn(ctx, c)
	if err != nil {
		p.log.Warn(op+" failed", "claim", name, "err", err)
		return claimResult{err: err}
	}
	p.log.Debug(op+" done", "claim", name, "cdiDevices", r.devices, "devices", len(r.kubeletDevices))
	return r
}

// prepare calls the driver's Prepare and checks the CDI names it returns.
func (p *Plugin) prepare(ctx context.Context, c Claim) ([]string, error) {
	devices, err := p.driver.Prepare(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", c.UID, err)
	}
	for _, d := range devices {
		if _, _, _, err := parser.ParseQualifiedName(d); err != nil {
			return nil, fmt.Errorf("prepare claim %s: driver returned an invalid CDI device name: %w", c.UID, err)
		}
	}
	return devices, nil
}

// unprepare calls the driver's Unprepare.
func (p *Plugin) unprepare(ctx context.Context, c Claim) error {
	if err := p.driver.Unprepare(ctx, c); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", c.UID, err)
	}
	return nil
}

// errorCode is the gRPC code the node agent gets for a claim's error:
// NOT_FOUND for ErrNotFound, INVALID_ARGUMENT for a malformed claim, the code of an error that carries a gRPC
// status, the code of a context error, UNKNOWN otherwise.
func errorCode(err error) codes.Code {
	var withStatus interface{ GRPCStatus() *status.Status }
	switch {
	case errors.Is(err, ErrNotFound):
		return codes.NotFound
	case errors.Is(err, errInvalidClaim):
		return codes.InvalidArgument
	case errors.As(err, &withStatus):
		return withStatus.GRPCStatus().Code()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}
