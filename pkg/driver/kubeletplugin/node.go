package kubeletplugin

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/grpc"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// nodeServer serves allot's DRA node API (APIAllot) on the driver's behalf.
type nodeServer struct {
	drapb.UnimplementedNodeServer
	p *Plugin
}

var _ drapb.NodeServer = &nodeServer{}

// NodeListAndWatchResources sends the current model at once and then every
// different one, until the client goes or the plugin stops.
func (s *nodeServer) NodeListAndWatchResources(_ *drapb.NodeListAndWatchResourcesRequest, stream grpc.ServerStreamingServer[drapb.NodeListAndWatchResourcesResponse]) error {
	var sent []byte
	for {
		model, changed := s.p.currentModel()
		if sent == nil || !bytes.Equal(model, sent) {
			if err := stream.Send(&drapb.NodeListAndWatchResourcesResponse{ResourceModel: model}); err != nil {
				return fmt.Errorf("send resource model: %w", err)
			}
			sent = model
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-s.p.stopped:
			return nil
		}
	}
}

// NodePrepareResources prepares every claim of the request on its own.
func (s *nodeServer) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	results := s.p.forEachClaim(ctx, "prepare", protoRefs(req.Claims), func(ctx context.Context, ref claimRef) (claimResult, error) {
		c, err := claimFromProto(ref.proto)
		if err != nil {
			return claimResult{}, err
		}
		devices, err := s.p.prepare(ctx, c)
		return claimResult{devices: devices}, err
	})
	resp := &drapb.NodePrepareResourcesResponse{Claims: make(map[string]*drapb.NodePrepareResourceResponse, len(results))}
	for uid, r := range results {
		out := &drapb.NodePrepareResourceResponse{CdiDevices: r.devices}
		if r.err != nil {
			out = &drapb.NodePrepareResourceResponse{Error: r.err.Error(), ErrorCode: uint32(errorCode(r.err))}
		}
		resp.Claims[uid] = out
	}
	return resp, nil
}

// NodeUnprepareResources unprepares every claim of the request on its own.
func (s *nodeServer) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	results := s.p.forEachClaim(ctx, "unprepare", protoRefs(req.Claims), func(ctx context.Context, ref claimRef) (claimResult, error) {
		c, err := claimFromProto(ref.proto)
		if err != nil {
			return claimResult{}, err
		}
		return claimResult{}, s.p.unprepare(ctx, c)
	})
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: make(map[string]*drapb.NodeUnprepareResourceResponse, len(results))}
	for uid, r := range results {
		out := &drapb.NodeUnprepareResourceResponse{}
		if r.err != nil {
			out.Error = r.err.Error()
		}
		resp.Claims[uid] = out
	}
	return resp, nil
}

func protoRefs(claims []*drapb.Claim) []claimRef {
	refs := make([]claimRef, len(claims))
	for i, pc := range claims {
		refs[i] = refFromProto(pc)
	}
	return refs
}
