package kubeletplugin

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/grpc"
	"tags.cncf.io/container-device-interface/pkg/parser"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// nodeServer serves the DRA node API on the driver's behalf.
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
	results := s.p.forEachClaim(ctx, "prepare", req.Claims, s.prepare)
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

// prepare calls the driver and checks the CDI names it returns.
func (s *nodeServer) prepare(ctx context.Context, c Claim) ([]string, error) {
	devices, err := s.p.driver.Prepare(ctx, c)
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

// NodeUnprepareResources unprepares every claim of the request on its own.
func (s *nodeServer) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	results := s.p.forEachClaim(ctx, "unprepare", req.Claims, func(ctx context.Context, c Claim) ([]string, error) {
		if err := s.p.driver.Unprepare(ctx, c); err != nil {
			return nil, fmt.Errorf("unprepare claim %s: %w", c.UID, err)
		}
		return nil, nil
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
