package v1alpha1

// Registration values of the DRA node API in the plugin registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1).
const (
	// PluginType is the registration's Type for DRA kubelet plugins.
	PluginType = "DRAPlugin"
	// Version is the version of this API, listed in the registration's
	// SupportedVersions.
	Version = "v1alpha1"
	// DefaultPluginsRegistryDir is where plugins put their registration
	// sockets, as with the kubelet.
	DefaultPluginsRegistryDir = "/var/lib/kubelet/plugins_registry"
	// DefaultPluginsDir is the parent of each driver's own directory, where
	// its DRA socket goes by default (DefaultPluginsDir/DRIVER/dra.sock).
	DefaultPluginsDir = "/var/lib/kubelet/plugins"
)
