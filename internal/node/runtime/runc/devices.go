package runc

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	rt "allot.dev/allot/internal/node/runtime"
)

// addDevices exposes device-plugin style devices: each host node is
// stat'ed for its type and major/minor numbers, created at its container
// path, and allowed in the device cgroup with the given permissions.
func addDevices(s *specs.Spec, devs []rt.Device) error {
	for _, d := range devs {
		if err := addDevice(s, d); err != nil {
			return fmt.Errorf("add device %s: %w", d.HostPath, err)
		}
	}
	return nil
}

func addDevice(s *specs.Spec, d rt.Device) error {
	perms := d.Permissions
	if perms == "" {
		perms = "rwm"
	}
	if strings.Trim(perms, "rwm") != "" {
		return fmt.Errorf("invalid permissions %q (want any of r, w, m)", d.Permissions)
	}
	ctrPath := d.ContainerPath
	if ctrPath == "" {
		ctrPath = d.HostPath
	}
	if !path.IsAbs(ctrPath) {
		return fmt.Errorf("container path %q is not absolute", ctrPath)
	}
	var st unix.Stat_t
	if err := unix.Stat(d.HostPath, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return errNotDevice
	}
	major, minor := int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	mode := os.FileMode(st.Mode & 0o777)
	var uid, gid uint32
	s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{
		Path: ctrPath, Type: typ, Major: major, Minor: minor, FileMode: &mode, UID: &uid, GID: &gid,
	})
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{
		Allow: true, Type: typ, Major: &major, Minor: &minor, Access: perms,
	})
	return nil
}

// injectCDI resolves fully qualified CDI device names against the spec
// directories (rescanned first, so specs written by a driver a moment ago
// count) and applies their container edits: env, mounts, device nodes
// (with cgroup rules) and hooks. Unresolvable names are an error naming
// them, with the problems of the spec files if there were any.
func injectCDI(cache *cdi.Cache, s *specs.Spec, names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if _, _, _, err := parser.ParseQualifiedName(n); err != nil {
			return fmt.Errorf("CDI device %q: %w", n, err)
		}
	}
	refreshErr := cache.Refresh()
	unresolved, err := cache.InjectDevices(s, names...)
	if len(unresolved) > 0 {
		err := fmt.Errorf("unresolvable CDI devices %s (spec dirs %s)",
			strings.Join(unresolved, ", "), strings.Join(cache.GetSpecDirectories(), ", "))
		if refreshErr != nil {
			err = fmt.Errorf("%w; spec problems: %w", err, refreshErr)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("inject CDI devices: %w", err)
	}
	return nil
}

// errNotDevice: a device-plugin Device's host path is not a device node.
var errNotDevice = errors.New("not a device node")
