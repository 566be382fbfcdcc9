package kubeletplugin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	specs "tags.cncf.io/container-device-interface/specs-go"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/driver/kubeletplugin"
	"allot.dev/allot/pkg/driver/kubeletplugin/cdi"
)

// cardDriver has one card and hands it out through a CDI spec per claim.
type cardDriver struct{ cdiDir string }

func (d *cardDriver) Enumerate(context.Context) (resourcev1alpha2.NodeResourceModel, error) {
	return resourcev1alpha2.NodeResourceModel{Partitionable: &resourcev1alpha2.PartitionableResources{
		ResourceInstances: []resourcev1alpha2.ResourceInstance{{Name: "card-0"}},
	}}, nil
}

func (d *cardDriver) Prepare(_ context.Context, c kubeletplugin.Claim) ([]string, error) {
	if c.Structured == nil || c.Structured.Partitionable == nil {
		return nil, fmt.Errorf("claim %s has no structured allocation", c.UID)
	}
	for _, in := range c.Structured.Partitionable.Instances {
		if in.ID != "card-0" {
			return nil, fmt.Errorf("instance %s: %w", in.ID, kubeletplugin.ErrNotFound)
		}
	}
	dev, _, err := cdi.WriteClaimSpec(d.cdiDir, "example.com/card", c.UID, specs.ContainerEdits{
		Env: []string{"CARD_CLAIM=" + c.Namespace + "/" + c.Name},
	})
	if err != nil {
		return nil, err
	}
	return []string{dev}, nil
}

func (d *cardDriver) Unprepare(_ context.Context, c kubeletplugin.Claim) error {
	_, err := cdi.RemoveClaimSpec(d.cdiDir, "example.com/card", c.UID)
	return err
}

// A driver author implements Enumerate, Prepare and Unprepare and calls
// Start; the node agent's side is played here by a plain gRPC client.
func Example() {
	dir, _ := os.MkdirTemp("", "kp")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	p, err := kubeletplugin.Start(ctx, &cardDriver{cdiDir: filepath.Join(dir, "cdi")}, kubeletplugin.Options{
		DriverName:         "cards.example.com",
		PluginsRegistryDir: filepath.Join(dir, "registry"),
		PluginDir:          filepath.Join(dir, "cards"),
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Stop()
	fmt.Println(filepath.Base(p.RegistrationSocket()), filepath.Base(p.DRASocket()))

	// The node agent prepares a claim.
	conn, _ := grpc.NewClient("unix://"+p.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	resp, err := drapb.NewNodeClient(conn).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{
		Namespace: "default", Name: "card", Uid: "0f4e",
		StructuredResourceHandle: []byte(`{"partitionable": {"instances": [{"id": "card-0"}]}}`),
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Claims["0f4e"].CdiDevices)
	// Output:
	// cards.example.com-reg.sock dra.sock
	// [example.com/card=0f4e]
}
