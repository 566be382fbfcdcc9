package kubeletplugin

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"allot.dev/allot/api/resource/resourceconv"
)

// KubeClient is the API access of a plugin in kubelet mode (APIKubelet):
// it gets claims (resource.k8s.io/v1) and its Node, and lists, creates,
// updates and deletes its node's ResourceSlices. A client-go
// kubernetes.Interface satisfies it, as does the fake clientset of
// k8s.io/client-go/kubernetes/fake; NewKubeClient builds one with only
// these two groups, which keeps a driver binary small.
type KubeClient interface {
	CoreV1() corev1client.CoreV1Interface
	ResourceV1() resourcev1client.ResourceV1Interface
}

type kubeClient struct {
	core     corev1client.CoreV1Interface
	resource resourcev1client.ResourceV1Interface
}

func (c kubeClient) CoreV1() corev1client.CoreV1Interface             { return c.core }
func (c kubeClient) ResourceV1() resourcev1client.ResourceV1Interface { return c.resource }

// NewKubeClient builds a KubeClient from connection settings, for example
// those of a kubeconfig holding a node-driver token DRIVER@NODE (see
// pkg/client.LoadRESTConfig).
func NewKubeClient(rc *rest.Config) (KubeClient, error) {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("create HTTP client: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("create core/v1 client: %w", err)
	}
	resource, err := resourcev1client.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("create resource.k8s.io/v1 client: %w", err)
	}
	return kubeClient{core: core, resource: resource}, nil
}

// kubeletServer serves the kubelet's DRA API (APIKubelet) on the driver's
// behalf: v1 directly, v1beta1 through drapbv1beta1.V1ServerWrapper.
type kubeletServer struct {
	drapbv1.UnimplementedDRAPluginServer
	p *Plugin
}

var _ drapbv1.DRAPluginServer = &kubeletServer{}

func kubeletRefs(claims []*drapbv1.Claim) []claimRef {
	refs := make([]claimRef, len(claims))
	for i, c := range claims {
		refs[i] = claimRef{Namespace: c.GetNamespace(), Name: c.GetName(), UID: c.GetUid()}
	}
	return refs
}

// NodePrepareResources prepares every claim of the request on its own:
// it reads the claim, checks it, hands the driver the Claim it would get
// through allot's API and answers the claim's devices of this driver. A
// claim that cannot be read fails alone, never the whole call.
func (s *kubeletServer) NodePrepareResources(ctx context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	results := s.p.forEachClaim(ctx, "prepare", kubeletRefs(req.GetClaims()), s.prepare)
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: make(map[string]*drapbv1.NodePrepareResourceResponse, len(results))}
	for uid, r := range results {
		out := &drapbv1.NodePrepareResourceResponse{Devices: r.kubeletDevices}
		if r.err != nil {
			out = &drapbv1.NodePrepareResourceResponse{Error: r.err.Error()}
		}
		resp.Claims[uid] = out
	}
	return resp, nil
}

func (s *kubeletServer) prepare(ctx context.Context, ref claimRef) (claimResult, error) {
	c, results, err := s.p.readClaim(ctx, ref)
	if err != nil {
		return claimResult{}, err
	}
	cdiDevices, err := s.p.prepare(ctx, c)
	if err != nil {
		return claimResult{}, err
	}
	devices := make([]*drapbv1.Device, 0, len(results))
	for _, r := range results {
		dev := &drapbv1.Device{
			// The main request, as the kubelet's plugin library answers:
			// containers name requests, not subrequests.
			RequestNames: []string{resourceconv.MainRequest(r.Request)},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CdiDeviceIds: cdiDevices,
		}
		if r.ShareID != nil {
			id := string(*r.ShareID)
			dev.ShareId = &id
		}
		devices = append(devices, dev)
	}
	return claimResult{devices: cdiDevices, kubeletDevices: devices}, nil
}

// readClaim gets the v1 claim of ref and returns the Claim the driver gets
// (the structured handle and data of resourceconv.DriverHandle for this
// driver and node, the same as the node agent builds for allot drivers)
// and the allocation's results of this driver.
func (p *Plugin) readClaim(ctx context.Context, ref claimRef) (Claim, []resourcev1.DeviceRequestAllocationResult, error) {
	c := Claim{Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID)}
	key := ref.Namespace + "/" + ref.Name
	claim, err := p.opts.KubeClient.ResourceV1().ResourceClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return c, nil, fmt.Errorf("claim %s does not exist (any more)", key)
	case err != nil:
		return c, nil, fmt.Errorf("read claim %s: %w", key, err)
	case claim.UID != c.UID:
		return c, nil, fmt.Errorf("claim %s has UID %s, not %s: it was deleted and created again", key, claim.UID, c.UID)
	case claim.Status.Allocation == nil:
		return c, nil, fmt.Errorf("claim %s is not allocated", key)
	}
	var results []resourcev1.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == p.opts.DriverName {
			results = append(results, r)
		}
	}
	if len(results) == 0 {
		return c, nil, fmt.Errorf("claim %s is allocated no device of driver %s", key, p.opts.DriverName)
	}
	sd, data, err := resourceconv.DriverHandle(claim.Status.Allocation, p.opts.DriverName, p.opts.NodeName)
	if err != nil {
		return c, nil, fmt.Errorf("claim %s %w", key, err)
	}
	c.Structured, c.ResourceHandle = sd, data
	return c, results, nil
}

// NodeUnprepareResources unprepares every claim of the request on its
// own. The driver gets the claim's reference only (namespace, name, UID):
// the claim may be gone already.
func (s *kubeletServer) NodeUnprepareResources(ctx context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	results := s.p.forEachClaim(ctx, "unprepare", kubeletRefs(req.GetClaims()), func(ctx context.Context, ref claimRef) (claimResult, error) {
		return claimResult{}, s.p.unprepare(ctx, Claim{Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID)})
	})
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: make(map[string]*drapbv1.NodeUnprepareResourceResponse, len(results))}
	for uid, r := range results {
		out := &drapbv1.NodeUnprepareResourceResponse{}
		if r.err != nil {
			out.Error = r.err.Error()
		}
		resp.Claims[uid] = out
	}
	return resp, nil
}
