package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Registration errors, returned to the plugin (which should exit).
var (
	ErrUnsupportedVersion = errors.New("unsupported device plugin API version")
	ErrInvalidResource    = errors.New("invalid extended resource name")
	ErrInvalidEndpoint    = errors.New("invalid endpoint")
)

// Register is the Registration service. It validates the request and
// returns at once: the plugin starts serving only after a successful
// answer, so the endpoint is dialled in the background. A registration of
// an already registered resource replaces its endpoint.
func (m *Manager) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if err := validateRegistration(r); err != nil {
		m.log.Warn("device manager: registration refused", "resource", r.GetResourceName(), "err", err)
		return nil, err
	}
	m.metrics.registrations.WithLabelValues(r.ResourceName).Inc()
	socket := filepath.Join(m.opts.Dir, r.Endpoint)
	ep := m.devices.register(r.ResourceName, socket, r.GetOptions())
	m.log.Info("device manager: plugin registered", "resource", r.ResourceName, "endpoint", r.Endpoint)
	go m.runEndpoint(ep)
	return &pluginapi.Empty{}, nil
}

func validateRegistration(r *pluginapi.RegisterRequest) error {
	supported := false
	for _, v := range pluginapi.SupportedVersions {
		supported = supported || v == r.Version
	}
	if !supported {
		return fmt.Errorf("%w: %q (supported: %v)", ErrUnsupportedVersion, r.Version, pluginapi.SupportedVersions)
	}
	if err := validateResourceName(r.ResourceName); err != nil {
		return err
	}
	return validateEndpoint(r.Endpoint)
}

// validateResourceName accepts extended resource names the way the
// kubelet does: domain-prefixed, outside kubernetes.io, not requests.*,
// and a qualified name once prefixed with requests. (quota needs that).
func validateResourceName(name string) error {
	switch {
	case !strings.Contains(name, "/"):
		return fmt.Errorf("%w: %q has no domain prefix", ErrInvalidResource, name)
	case strings.Contains(name, "kubernetes.io/"):
		return fmt.Errorf("%w: %q is in the kubernetes.io namespace", ErrInvalidResource, name)
	case strings.HasPrefix(name, "requests."):
		return fmt.Errorf("%w: %q is in the requests. namespace", ErrInvalidResource, name)
	}
	if errs := validation.IsQualifiedName("requests." + name); len(errs) > 0 {
		return fmt.Errorf("%w: %q: %s", ErrInvalidResource, name, strings.Join(errs, "; "))
	}
	return nil
}

// validateEndpoint accepts a plain file name in the plugin directory.
func validateEndpoint(ep string) error {
	if ep == "" || ep == "." || ep == ".." || strings.ContainsAny(ep, "/\x00") || filepath.Base(ep) != ep {
		return fmt.Errorf("%w: %q is not a file name", ErrInvalidEndpoint, ep)
	}
	if ep == KubeletSocket {
		return fmt.Errorf("%w: %q is the registration socket", ErrInvalidEndpoint, ep)
	}
	return nil
}
