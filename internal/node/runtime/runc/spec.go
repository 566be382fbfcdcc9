package runc

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	rt "allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/images"
)

// Annotations recording a container's identity in its OCI spec (the same
// values are in the bundle's container.json, which List reads).
const (
	AnnotationPodUID       = "allot.dev/pod-uid"
	AnnotationPodNamespace = "allot.dev/pod-namespace"
	AnnotationPodName      = "allot.dev/pod-name"
	AnnotationName         = "allot.dev/container-name"
	AnnotationAttempt      = "allot.dev/attempt"
)

// defaultCaps is Docker's and containerd's default capability set.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// maskedPaths and readonlyPaths are runc's defaults (`runc spec`).
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
		"/proc/scsi",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// baseMounts are the filesystems every container gets.
func baseMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

// hostNetworkFiles are bind-mounted read-only from the host when present:
// containers share the host's network namespace, so they share its name
// resolution too.
var hostNetworkFiles = []string{"/etc/resolv.conf", "/etc/hosts"}

// buildSpec makes the OCI spec of a container before device injection.
// rootPath is the rootfs to use and readonly whether it is the shared
// image (no overlay), in which case /tmp becomes a tmpfs.
func buildSpec(cs rt.ContainerSpec, img images.Image, rootPath string, readonly bool) (*specs.Spec, error) {
	args, err := processArgs(cs, img)
	if err != nil {
		return nil, err
	}
	cwd := cs.WorkingDir
	if cwd == "" {
		cwd = img.Config.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	if !path.IsAbs(cwd) {
		return nil, fmt.Errorf("working dir %q is not absolute", cwd)
	}
	hostname := hostnameFor(cs.PodName)
	env := mergeEnv([]string{"PATH=" + images.DefaultPath, "HOSTNAME=" + hostname}, img.Config.Env, cs.Env)
	s := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: rootPath, Readonly: readonly},
		Hostname: hostname,
		Process: &specs.Process{
			Args: args,
			Env:  env,
			Cwd:  cwd,
			// No Rlimits: the container inherits the shim's (the agent's).
			Capabilities: &specs.LinuxCapabilities{
				Bounding: defaultCaps, Effective: defaultCaps, Permitted: defaultCaps,
			},
		},
		Mounts:      baseMounts(),
		Annotations: annotations(cs),
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.MountNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			},
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	if readonly {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=1777"}})
	}
	for _, f := range hostNetworkFiles {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: f, Type: "bind", Source: f,
				Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}})
		}
	}
	if err := addMounts(s, cs.Mounts); err != nil {
		return nil, err
	}
	if err := addDevices(s, cs.Devices); err != nil {
		return nil, err
	}
	return s, nil
}

// processArgs applies the Kubernetes rules: command replaces the image's
// entrypoint (and drops its cmd), args replace the image's cmd.
func processArgs(cs rt.ContainerSpec, img images.Image) ([]string, error) {
	var args []string
	switch {
	case len(cs.Command) > 0:
		args = append(append(args, cs.Command...), cs.Args...)
	case len(cs.Args) > 0:
		args = append(append(args, img.Config.Entrypoint...), cs.Args...)
	default:
		args = append(append(args, img.Config.Entrypoint...), img.Config.Cmd...)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("no command: the container has none and image %s has no default", img.Name)
	}
	return args, nil
}

// mergeEnv concatenates KEY=VALUE lists; a later KEY replaces an earlier
// one in place.
func mergeEnv(lists ...[]string) []string {
	var out []string
	index := map[string]int{}
	for _, list := range lists {
		for _, kv := range list {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := index[k]; ok {
				out[i] = kv
				continue
			}
			index[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// hostnameFor makes a pod name a valid host name (at most 63 characters).
func hostnameFor(podName string) string {
	h := sanitizeID(podName)
	h = strings.Trim(strings.ReplaceAll(strings.ReplaceAll(h, "_", "-"), ".", "-"), "-")
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	if h == "" {
		return "container"
	}
	return h
}

func annotations(cs rt.ContainerSpec) map[string]string {
	a := make(map[string]string, len(cs.Annotations)+5)
	for k, v := range cs.Annotations {
		a[k] = v
	}
	a[AnnotationPodUID] = cs.PodUID
	a[AnnotationPodNamespace] = cs.PodNamespace
	a[AnnotationPodName] = cs.PodName
	a[AnnotationName] = cs.Name
	a[AnnotationAttempt] = strconv.Itoa(cs.Attempt)
	return a
}

// addMounts adds device-plugin style bind mounts; the host path must exist.
func addMounts(s *specs.Spec, mounts []rt.Mount) error {
	for _, m := range mounts {
		if !path.IsAbs(m.ContainerPath) || !path.IsAbs(m.HostPath) {
			return fmt.Errorf("mount %s:%s: paths must be absolute", m.HostPath, m.ContainerPath)
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			return fmt.Errorf("mount %s: %w", m.HostPath, err)
		}
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.ContainerPath, Type: "bind",
			Source: m.HostPath, Options: []string{"rbind", "rprivate", mode}})
	}
	return nil
}
