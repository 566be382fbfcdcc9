package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"tags.cncf.io/container-device-interface/pkg/parser"
)

// maxDevices is the most devices one ResourceSlice may hold (the API's
// limit); the driver publishes its GPUs in one slice.
const maxDevices = 128

// unixPathMax is the longest AF_UNIX socket path Linux accepts (the
// library applies the same limit to the registration socket only).
const unixPathMax = 108

// config is the parsed command line.
type config struct {
	driverName       string
	nodeName         string
	kubeconfig       string
	registrarDir     string // --kubelet-registrar-directory-path
	pluginsDir       string // --kubelet-plugins-directory-path; the plugin data dir is pluginsDir/driverName
	cdiRoot          string
	gpus             int
	stateFile        string
	prepareHoldFile  string
	healthFile       string
	rollingUpdateUID string
	publish          bool
	serialize        bool

	// The profile (see profiles.go) and its options.
	profile                string
	gpuPartitions          int
	gpuMultipleAllocations bool
	bindingConditions      bool
	nics                   int
	numaNodes, cpusPerNUMA int
	// satisfyBindingConditions: after this delay, set the binding
	// conditions of this node's devices in claims true (negative: never);
	// failBinding sets the failure condition instead.
	satisfyBindingConditions time.Duration
	failBinding              bool
	// controllerKubeconfig: the credentials of the binding-condition
	// controller (a driver-wide token); empty: kubeconfig.
	controllerKubeconfig string
}

// parseFlags parses args (without the program name). getenv supplies
// NODE_NAME, the default of --node-name.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("upstreamdriver", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.driverName, "driver-name", "upstream.example.com", "DRA driver name; also the CDI vendor (kind DRIVER/gpu)")
	fs.StringVar(&c.nodeName, "node-name", getenv("NODE_NAME"), "node this driver runs on; names the published pool (default $NODE_NAME)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the driver's credentials (empty: in-cluster config)")
	fs.StringVar(&c.registrarDir, "kubelet-registrar-directory-path", kubeletplugin.KubeletRegistryDir, "directory the node agent watches for registration sockets")
	fs.StringVar(&c.pluginsDir, "kubelet-plugins-directory-path", kubeletplugin.KubeletPluginsDir, "parent of the plugin data directory DIR/<driver> that holds the DRA socket")
	fs.StringVar(&c.cdiRoot, "cdi-root", "/var/run/cdi", "directory for the CDI spec files written by prepare")
	fs.IntVar(&c.gpus, "gpus", 2, "number of GPUs to publish (gpu-0 .. gpu-N-1)")
	fs.StringVar(&c.stateFile, "state-file", "", "test hook: append 'prepare UID' / 'unprepare UID' lines (fsync'd) after each successful call")
	fs.StringVar(&c.prepareHoldFile, "prepare-hold-file", "", "test hook: while this file exists, PrepareResourceClaims blocks before doing anything")
	fs.StringVar(&c.healthFile, "health-file", "", "test hook: file of 'DEVICE HEALTH [message]' lines streamed as device health")
	fs.StringVar(&c.rollingUpdateUID, "rolling-update-uid", "", "enable rolling updates with this pod UID (kubeletplugin.RollingUpdate)")
	fs.BoolVar(&c.publish, "publish", true, "publish the GPUs as a ResourceSlice pool named after the node")
	fs.BoolVar(&c.serialize, "serialize", true, "let the library serialize prepare and unprepare calls (kubeletplugin.Serialize)")
	fs.StringVar(&c.profile, "profile", profileGPU, "what to publish: gpu, net (shareable NICs) or cpu (shareable NUMA nodes), the shapes of the example driver's profiles")
	fs.IntVar(&c.gpuPartitions, "gpu-partitions", 0, "gpu profile: publish each GPU as this many partitions and a full device sharing its counters")
	fs.BoolVar(&c.gpuMultipleAllocations, "gpu-allow-multiple-allocations", false, "gpu profile: GPUs are shared by many claims (consumable memory and compute)")
	fs.BoolVar(&c.bindingConditions, "binding-conditions", false, "gpu profile: devices wait for the binding condition "+bindingCondition+" (failure: "+bindingFailureCondition+")")
	fs.DurationVar(&c.satisfyBindingConditions, "satisfy-binding-conditions", -1, "as the example driver's controller: this long after a claim is allocated this node's devices with binding conditions, set them true in its status (negative: never)")
	fs.BoolVar(&c.failBinding, "fail-binding", false, "with --satisfy-binding-conditions: set the binding failure condition instead")
	fs.StringVar(&c.controllerKubeconfig, "controller-kubeconfig", "", "kubeconfig of the binding-condition controller, which writes claims not yet bound to a node (a driver token on allot; empty: --kubeconfig)")
	fs.IntVar(&c.nics, "nics", 2, "net profile: number of NICs (nic-0 .. nic-N-1)")
	fs.IntVar(&c.numaNodes, "numa-nodes", 2, "cpu profile: number of NUMA nodes (numa-0 .. numa-N-1)")
	fs.IntVar(&c.cpusPerNUMA, "cpus-per-numa-node", 4, "cpu profile: CPUs of each NUMA node")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return c, c.validate()
}

func (c config) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(c.driverName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--driver-name %q: %s", c.driverName, strings.Join(msgs, "; ")))
	} else if err := parser.ValidateVendorName(c.driverName); err != nil {
		errs = append(errs, fmt.Errorf("--driver-name %q: not a CDI vendor: %w", c.driverName, err))
	}
	if c.nodeName == "" {
		errs = append(errs, errors.New("--node-name (or NODE_NAME) is required"))
	}
	if c.gpus < 0 || c.gpus > maxDevices {
		errs = append(errs, fmt.Errorf("--gpus %d: must be 0..%d", c.gpus, maxDevices))
	}
	switch c.profile {
	case profileGPU:
		if c.gpuPartitions < 0 || c.gpus*(c.gpuPartitions+1) > maxDevices {
			errs = append(errs, fmt.Errorf("--gpu-partitions %d: must be 0 or more, with at most %d devices in all (--gpus × (partitions + 1))", c.gpuPartitions, maxDevices))
		}
	case profileNet:
		if c.nics < 0 || c.nics > maxDevices {
			errs = append(errs, fmt.Errorf("--nics %d: must be 0..%d", c.nics, maxDevices))
		}
	case profileCPU:
		if c.numaNodes < 0 || c.numaNodes > maxDevices {
			errs = append(errs, fmt.Errorf("--numa-nodes %d: must be 0..%d", c.numaNodes, maxDevices))
		}
		if c.cpusPerNUMA < 1 {
			errs = append(errs, fmt.Errorf("--cpus-per-numa-node %d: must be at least 1", c.cpusPerNUMA))
		}
	default:
		errs = append(errs, fmt.Errorf("--profile %q: must be gpu, net or cpu", c.profile))
	}
	if c.profile != profileGPU && (c.gpuPartitions != 0 || c.gpuMultipleAllocations || c.bindingConditions) {
		errs = append(errs, fmt.Errorf("--gpu-partitions, --gpu-allow-multiple-allocations and --binding-conditions belong to --profile gpu, not %s", c.profile))
	}
	for flagName, dir := range map[string]string{
		"--kubelet-registrar-directory-path": c.registrarDir,
		"--kubelet-plugins-directory-path":   c.pluginsDir,
		"--cdi-root":                         c.cdiRoot,
	} {
		if !filepath.IsAbs(dir) {
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute path", flagName, dir))
		}
	}
	if len(errs) == 0 {
		for _, sock := range []string{c.registrationSocket(), c.draSocket()} {
			if len(sock) > unixPathMax {
				errs = append(errs, fmt.Errorf("socket path %q is longer than %d bytes", sock, unixPathMax))
			}
		}
	}
	return errors.Join(errs...)
}

// pluginDataDir is the library's PluginDataDirectoryPath: DIR/<driver>.
func (c config) pluginDataDir() string {
	return filepath.Join(c.pluginsDir, c.driverName)
}

// registrationSocket is where the library listens for the node agent's
// GetInfo, by the library's own naming rules.
func (c config) registrationSocket() string {
	name := c.driverName + "-reg.sock"
	if c.rollingUpdateUID != "" {
		name = kubeletplugin.RollingUpdateRegistrarSocketFile(c.registrarDir, c.driverName, types.UID(c.rollingUpdateUID))
	}
	return filepath.Join(c.registrarDir, name)
}

// draSocket is the DRA gRPC endpoint that GetInfo advertises: dra.sock,
// or dra-<uid>.sock with a rolling update.
func (c config) draSocket() string {
	name := "dra.sock"
	if c.rollingUpdateUID != "" {
		name = "dra-" + c.rollingUpdateUID + ".sock"
	}
	return filepath.Join(c.pluginDataDir(), name)
}

// pluginOptions are the options of kubeletplugin.Start; everything not
// set here is the library's default.
func (c config) pluginOptions(client kubernetes.Interface) []kubeletplugin.Option {
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(c.driverName),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(c.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(c.pluginDataDir()),
		kubeletplugin.Serialize(c.serialize),
	}
	if c.rollingUpdateUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(c.rollingUpdateUID)))
	}
	return opts
}
