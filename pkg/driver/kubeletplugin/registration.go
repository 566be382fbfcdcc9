package kubeletplugin

import (
	"context"
	"errors"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	drapb "allot.dev/allot/api/dra/v1alpha1"
)

// registrationServer answers the node agent's plugin watcher.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	p *Plugin
}

var _ registerapi.RegistrationServer = &registrationServer{}

// GetInfo names the driver, its DRA socket and the API version it serves.
func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              drapb.PluginType,
		Name:              s.p.opts.DriverName,
		Endpoint:          s.p.draSock,
		SupportedVersions: []string{drapb.Version},
	}, nil
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
	return &registerapi.RegistrationStatusResponse{}, nil
}
