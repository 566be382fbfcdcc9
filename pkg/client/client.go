package client

import (
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/api/scheme"
	coordinationv1 "k8s.io/api/coordination/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// parameterCodec encodes ListOptions, DeleteOptions and friends as query
// parameters; every group version of scheme.Scheme registers them.
var parameterCodec = runtime.NewParameterCodec(scheme.Scheme)

// Client talks to one allot API server. It is safe for concurrent use.
type Client struct {
	config     *rest.Config
	core       rest.Interface
	resource   rest.Interface
	resourceV1 rest.Interface
	apiext     rest.Interface
	coord      rest.Interface
	dynamic    dynamic.Interface
	metadata   metadata.Interface
	discovery  *discovery.DiscoveryClient
}

// NewForConfig builds a Client. The config is copied; its QPS and Burst
// default to DefaultQPS and DefaultBurst when zero.
func NewForConfig(rc *rest.Config) (*Client, error) {
	cfg := rest.CopyConfig(rc)
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create HTTP client: %w", err)
	}
	c := &Client{config: cfg}
	for _, g := range []struct {
		gv  schema.GroupVersion
		dst *rest.Interface
	}{
		{corev1.SchemeGroupVersion, &c.core},
		{resourcev1alpha2.SchemeGroupVersion, &c.resource},
		{resourcev1.SchemeGroupVersion, &c.resourceV1},
		{apiextv1.SchemeGroupVersion, &c.apiext},
		{coordinationv1.SchemeGroupVersion, &c.coord},
	} {
		rc, err := restClientFor(cfg, hc, g.gv)
		if err != nil {
			return nil, err
		}
		*g.dst = rc
	}
	if c.dynamic, err = dynamic.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("create dynamic client: %w", err)
	}
	if c.metadata, err = metadata.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("create metadata client: %w", err)
	}
	if c.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("create discovery client: %w", err)
	}
	return c, nil
}

func restClientFor(base *rest.Config, hc *http.Client, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = codecs
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("create REST client for %s: %w", gv, err)
	}
	return rc, nil
}

// RESTConfig returns a copy of the client's connection settings.
func (c *Client) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// Dynamic returns a dynamic client for any kind, custom resources included.
func (c *Client) Dynamic() dynamic.Interface { return c.dynamic }

// Metadata returns a client that reads only objects' metadata
// (PartialObjectMetadata), for controllers such as garbage collection that
// follow every kind.
func (c *Client) Metadata() metadata.Interface { return c.metadata }

// Discovery returns a discovery client for the server's groups and kinds.
// It implements both discovery.DiscoveryInterface and
// discovery.DiscoveryInterfaceWithContext; wrap it in a memory cache
// (k8s.io/client-go/discovery/cached/memory) for repeated lookups.
func (c *Client) Discovery() *discovery.DiscoveryClient { return c.discovery }

// RESTClient returns the client's REST client of a built-in group version
// (core v1, resource.k8s.io/v1alpha2 and v1, apiextensions.k8s.io/v1,
// coordination.k8s.io/v1), or nil.
func (c *Client) RESTClient(gv schema.GroupVersion) rest.Interface {
	switch gv {
	case corev1.SchemeGroupVersion:
		return c.core
	case resourcev1alpha2.SchemeGroupVersion:
		return c.resource
	case resourcev1.SchemeGroupVersion:
		return c.resourceV1
	case apiextv1.SchemeGroupVersion:
		return c.apiext
	case coordinationv1.SchemeGroupVersion:
		return c.coord
	}
	return nil
}
