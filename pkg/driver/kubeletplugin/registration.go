package kubeletplugin

import (
	"context"
	"errors"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// registrationServer answers the node agent's plugin watcher.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	p *Plugin
}

var _ registerapi.RegistrationServer = &registrationServer{}

// GetInfo names the driver, its DRA socket and the API versions it
// serves: allot's v1alpha1, or the kubelet's v1.DRAPlugin and
// v1beta1.DRAPlugin.
func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              drapb.PluginType,
		Name:              s.p.opts.DriverName,
		Endpoint:          s.p.draSock,
		SupportedVersions: s.p.opts.API.versions(),
	}, nil
}

// versions are the services a plugin of the API advertises.
func (a API) versions() []string {
	if a == APIKubelet {
		return []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}
	}
	return []string{drapb.Version}
}

// NotifyRegistrationStatus records whether the node agent accepted the
// driver.
func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	var err error
	if !st.PluginRegistered {
		msg := st.Error
		if msg == "" {
			msg = "no reason given"
		}
		err = errors.New("node agent rejected the registration: " + msg)
		s.p.log.Error("registration failed", "err", err)
	} else {
		s.p.log.Info("registered with the node agent")
	}
	s.p.mu.Lock()
	s.p.regOK, s.p.regErr = st.PluginRegistered, err
	s.p.mu.Unlock()
	if st.PluginRegistered && s.p.slices != nil {
		// The node agent may have removed the slices while the driver was
		// away; check them now rather than at the next resync.
		s.p.slices.trigger()
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
