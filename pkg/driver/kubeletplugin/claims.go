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

// claimResult is the outcome of one claim.
type claimResult struct {
	devices []string
	err     error
}

// forEachClaim runs fn for every distinct claim UID of a request, at most
// Options.MaxConcurrentClaims at a time, each under its claim's lock, and
// returns the results by UID. A claim that does not decode or whose fn panics gets an error.
func (p *Plugin) forEachClaim(ctx context.Context, op string, claims []*drapb.Claim, fn func(context.Context, Claim) ([]string, error)) map[string]claimResult {
	results := make(map[string]claimResult, len(claims))
	var unique []*drapb.Claim
	for _, pc := range claims {
		if _, dup := results[pc.Uid]; !dup {
			results[pc.Uid] = claimResult{}
			unique = append(unique, pc)
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan *drapb.Claim)
	)
	workers := min(p.opts.MaxConcurrentClaims, len(unique))
	for range workers {
		wg.Go(func() {
			for pc := range next {
				r := p.runClaim(ctx, op, pc, fn)
				mu.Lock()
				results[pc.Uid] = r
				mu.Unlock()
			}
		})
	}
	for _, pc := range unique {
		next <- pc
	}
	close(next)
	wg.Wait()
	return results
}

// runClaim decodes one claim and runs fn on it under the claim's lock,
// turning a panic into the claim's error.
func (p *Plugin) runClaim(ctx context.Context, op string, pc *drapb.Claim, fn func(context.Context, Claim) ([]string, error)) (r claimResult) {
	c, err := claimFromProto(pc)
	if err != nil {
		p.log.Warn(op+" claim rejected", "namespace", pc.Namespace, "name", pc.Name, "uid", pc.Uid, "err", err)
		return claimResult{err: err}
	}
	unlock, err := p.locks.Lock(ctx, c.UID)
	if err != nil {
		return claimResult{err: fmt.Errorf("wait for another call on claim %s: %w", c.UID, err)}
	}
	defer unlock()
	defer func() {
		if v := recover(); v != nil {
			p.log.Error(op+" panicked", "claim", c.String(), "panic", v, "stack", string(debug.Stack()))
			r = claimResult{err: fmt.Errorf("%s claim %s: driver panicked: %v", op, c.UID, v)}
		}
	}()
	devices, err := fn(ctx, c)
	if err != nil {
		p.log.Warn(op+" failed", "claim", c.String(), "err", err)
		return claimResult{err: err}
	}
	p.log.Debug(op+" done", "claim", c.String(), "cdiDevices", devices)
	return claimResult{devices: devices}
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
