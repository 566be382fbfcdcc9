package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/controller/manager"
	"allot.dev/allot/pkg/client"
)

// components are the control-plane parts `allot up` runs beside the API
// server, each with its own role's token, as if it were a separate process.
type components struct {
	wg sync.WaitGroup
}

func (c *components) wait() { c.wg.Wait() }

func (c *components) run(ctx context.Context, o Options, name string, f func(context.Context) error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			o.Logger.Error("component failed", "component", name, "err", err)
		}
	}()
}

// startComponents writes a kubeconfig per component under
// DATA-DIR/components and starts the enabled ones.
func startComponents(ctx context.Context, o Options, url string, tokens map[string]string, caPEM []byte) (*components, error) {
	c := &components{}
	if o.enabled("controller-manager") {
		rc, err := componentConfig(o.DataDir, url, auth.ControllerManagerName, tokens, caPEM)
		if err != nil {
			return nil, err
		}
		cfg := o.Controllers
		cfg.REST = rc
		cfg.Logger = o.Logger.With("component", "controller-manager")
		c.run(ctx, o, "controller-manager", func(ctx context.Context) error { return manager.Run(ctx, cfg) })
	}
	return c, nil
}

// componentConfig writes DATA-DIR/components/NAME.kubeconfig with NAME's
// token and returns its REST config.
func componentConfig(dataDir, url, name string, tokens map[string]string, caPEM []byte) (*rest.Config, error) {
	tok, ok := tokens[name]
	if !ok {
		return nil, fmt.Errorf("no token for %s in the tokens file", name)
	}
	path := filepath.Join(dataDir, "components", name+".kubeconfig")
	if err := WriteKubeconfig(path, url, tok, caPEM); err != nil {
		return nil, err
	}
	rc, err := client.LoadRESTConfig(path)
	if err != nil {
		return nil, fmt.Errorf("load %s kubeconfig: %w", name, err)
	}
	return rc, nil
}
