// Package runc is the node agent's real container runtime: every container
// is an OCI bundle run by the runc binary (Debian's runc), with CDI device
// edits and device-plugin devices injected into its OCI spec.
//
// Layout under the root directory (Options.RootDir):
//
//	ROOT/images/NAME/...        the image store (package images)
//	ROOT/containers/ID/         one bundle per container (see bundle.go)
//	ROOT/runc/                  runc's own state (runc --root)
//
// Lifecycle and the contract with the agent:
//   - Create writes the bundle: container.json (identity, so List can
//     report it after an agent restart), a per-container overlay rootfs
//     over the image (or the image read-only with a tmpfs /tmp when
//     overlayfs is unavailable), and config.json. Unknown images,
//     unresolvable CDI devices and missing device nodes fail here.
//   - Start launches a shim (the allot binary's hidden `runc-shim`
//     command) in its own session. The shim runs `runc create` and `runc
//     start` with the container's stdio on the log file, becomes the
//     container's parent (child subreaper), waits for it, and records the
//     exit status in exit.json. Shim and container outlive the agent; a
//     restarted agent finds everything in the bundle dirs (adoption).
//   - Status and List combine the bundle's records with `runc state`.
//   - Stop sends SIGTERM, then SIGKILL after the grace period; Remove
//     force-deletes the runc container, unmounts and removes the bundle
//     (never the log file). PurgeRuncState (allot down, no agent running)
//     deletes every container of the runc root from runc's state.
//
// Containers share the host's network namespace (no pod networking) and
// get their own pid, mount, ipc and uts namespaces; the host name is the
// pod name. The agent must run as root. No seccomp profile is applied.
package runc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"tags.cncf.io/container-device-interface/pkg/cdi"

	"allot.dev/allot/internal/atomicfile"
	rt "allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/images"
)

// ShimCommandName is the hidden subcommand of the allot binary that runs
// ShimMain; the default Options.ShimCommand is [os.Executable(), it].
const ShimCommandName = "runc-shim"

// ImageStoreDir is where a Runtime over rootDir keeps its images (for
// `allot image import` and friends).
func ImageStoreDir(rootDir string) string { return filepath.Join(rootDir, "images") }

// Options configure a Runtime.
type Options struct {
	// RootDir holds images, bundles and runc's state. Required.
	RootDir string
	// RuncPath is the runc binary (default: "runc" looked up in PATH).
	RuncPath string
	// CDISpecDirs are the CDI spec directories (default /etc/cdi and
	// /var/run/cdi).
	CDISpecDirs []string
	// ShimCommand is the argv prefix that runs ShimMain; the bundle dir
	// is appended (default [os.Executable(), "runc-shim"]).
	ShimCommand []string
	// Images is the image store (default ROOT/images).
	Images *images.Store
	// DisableOverlay forces read-only image rootfs instead of overlays.
	DisableOverlay bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Runtime implements runtime.Runtime with runc.
type Runtime struct {
	dir     string // ROOT/containers
	runc    cli
	shim    []string
	images  *images.Store
	cdi     *cdi.Cache
	overlay bool
	log     *slog.Logger
}

var _ rt.Runtime = (*Runtime)(nil)

// New checks that runc exists and prepares the root directory.
func New(o Options) (*Runtime, error) {
	if o.RootDir == "" {
		return nil, errors.New("runc runtime: root dir is required")
	}
	root, err := filepath.Abs(o.RootDir)
	if err != nil {
		return nil, fmt.Errorf("resolve root dir: %w", err)
	}
	if o.RuncPath == "" {
		o.RuncPath = "runc"
	}
	runcPath, err := exec.LookPath(o.RuncPath)
	if err != nil {
		return nil, fmt.Errorf("find runc (install Debian's runc package): %w", err)
	}
	if os.Getenv(shimEnv) != "" {
		return nil, fmt.Errorf("runc runtime: refusing to run inside a shim (%s is set): the shim command does not reach ShimMain", shimEnv)
	}
	if len(o.ShimCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable for the shim: %w", err)
		}
		o.ShimCommand = []string{exe, ShimCommandName}
	}
	if err := probeShim(o.ShimCommand); err != nil {
		return nil, err
	}
	if len(o.CDISpecDirs) == 0 {
		o.CDISpecDirs = cdi.DefaultSpecDirs
	}
	if o.Images == nil {
		o.Images = images.New(ImageStoreDir(root))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Runtime{
		dir:     filepath.Join(root, "containers"),
		runc:    cli{path: runcPath, root: filepath.Join(root, "runc")},
		shim:    o.ShimCommand,
		images:  o.Images,
		overlay: !o.DisableOverlay,
		log:     o.Logger.With("runtime", "runc"),
	}
	for _, d := range []string{r.dir, r.runc.root} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	r.cdi, err = cdi.NewCache(cdi.WithSpecDirs(o.CDISpecDirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("create CDI cache: %w", err)
	}
	return r, nil
}

// Name is "runc".
func (r *Runtime) Name() string { return "runc" }

// RuntimeVersion is "runc://VERSION" from `runc --version`.
func (r *Runtime) RuntimeVersion(ctx context.Context) string {
	v, err := r.runc.version(ctx)
	if err != nil || v == "" {
		return "runc://unknown"
	}
	return "runc://" + v
}

// SupportsCDI is true: CDIDevices are injected into the OCI spec.
func (r *Runtime) SupportsCDI() bool { return true }

func (r *Runtime) bundle(id string) (bundle, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", fmt.Errorf("container %q: %w", id, rt.ErrNotFound)
	}
	return bundle(filepath.Join(r.dir, id)), nil
}

// Create writes the container's bundle; see the package doc.
func (r *Runtime) Create(ctx context.Context, cs rt.ContainerSpec) (string, error) {
	if cs.PodName == "" || cs.Name == "" || cs.Image == "" {
		return "", errors.New("create container: pod name, container name and image are required")
	}
	img, err := r.images.Get(ctx, cs.Image)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cs.Name, err)
	}
	id, err := newID(cs)
	if err != nil {
		return "", err
	}
	b := bundle(filepath.Join(r.dir, id))
	if err := os.Mkdir(string(b), 0o700); err != nil {
		return "", fmt.Errorf("create bundle: %w", err)
	}
	if err := r.fillBundle(b, id, cs, img); err != nil {
		if cerr := r.destroy(b); cerr != nil {
			r.log.Warn("clean up failed create", "id", id, "err", cerr)
		}
		return "", fmt.Errorf("create container %s: %w", cs.Name, err)
	}
	return id, nil
}

// fillBundle writes the record first (so a crash leaves a container that
// List shows and Remove cleans), then the rootfs and the OCI spec.
func (r *Runtime) fillBundle(b bundle, id string, cs rt.ContainerSpec, img images.Image) error {
	rec := record{
		ID: id, PodUID: cs.PodUID, PodNamespace: cs.PodNamespace, PodName: cs.PodName,
		Name: cs.Name, Attempt: cs.Attempt, Image: img.Name, LogPath: cs.LogPath,
		CreatedAt: time.Now(), Overlay: r.overlay, Runc: r.runc.path, RuncRoot: r.runc.root,
	}
	if rec.LogPath == "" {
		rec.LogPath = os.DevNull
	}
	logPath, err := filepath.Abs(rec.LogPath) // the shim runs in /
	if err != nil {
		return fmt.Errorf("resolve log path: %w", err)
	}
	rec.LogPath = logPath
	if f := cs.Fence; f != nil && f.HeartbeatFile != "" && f.After > 0 {
		if rec.FenceFile, err = filepath.Abs(f.HeartbeatFile); err != nil {
			return fmt.Errorf("resolve fence heartbeat file: %w", err)
		}
		rec.FenceAfter = f.After
	}
	if err := atomicfile.WriteJSON(b.path(recordFile), rec); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	rootPath := img.Rootfs
	if r.overlay {
		if err := mountOverlay(b, img.Rootfs); err != nil {
			r.log.Warn("overlayfs unavailable; using the image read-only", "id", id, "err", err)
			rec.Overlay = false
			if err := atomicfile.WriteJSON(b.path(recordFile), rec); err != nil {
				return fmt.Errorf("write record: %w", err)
			}
		} else {
			rootPath = b.path(rootfsName)
		}
	}
	s, err := buildSpec(cs, img, rootPath, !rec.Overlay)
	if err != nil {
		return err
	}
	if err := injectCDI(r.cdi, s, cs.CDIDevices); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(b.path(configFile), s); err != nil {
		return fmt.Errorf("write OCI spec: %w", err)
	}
	return nil
}

// newID makes a readable, unique runc container ID.
func newID(cs rt.ContainerSpec) (string, error) {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("make container id: %w", err)
	}
	short := func(s string) string {
		s = sanitizeID(s)
		if len(s) > 40 {
			s = s[:40]
		}
		return s
	}
	return fmt.Sprintf("%s_%s_%d_%s", short(cs.PodName), short(cs.Name), cs.Attempt, hex.EncodeToString(rnd[:])), nil
}

// sanitizeID keeps the characters runc accepts in IDs ([A-Za-z0-9_.-]).
func sanitizeID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '-'
	}, s)
}
