// Package images is the node agent's local image store: one unpacked root
// filesystem per image under DIR/NAME/rootfs, with a small JSON manifest
// (DIR/NAME/manifest.json) holding the image's defaults (entrypoint, cmd,
// env, working dir). There is no registry client: images come from
// `allot image import NAME ROOTFS.tar`, and `busybox` is built in, made on
// first use from the host's static busybox (Debian's busybox-static).
//
// Contract:
//   - Names are normalized as a container runtime would resolve them
//     (docker.io/library/busybox:latest and busybox:latest are busybox);
//     Normalize documents the rules.
//   - Get returns an image whose rootfs is complete: images appear in the
//     store by an atomic rename of a fully written directory, so a crash
//     mid-import leaves only a temporary directory, never half an image.
//   - Callers must not write into an image's rootfs; the runc runtime
//     layers a per-container overlay over it (or mounts it read-only).
//   - Replacing an image (Import with replace) while containers use it is
//     not supported: their overlays keep pointing at the old directory.
//
// A Store is safe for concurrent use, also by several processes on the
// same directory (the last atomic rename wins).
package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"allot.dev/allot/internal/atomicfile"
)

// ErrNotFound is returned (wrapped, naming the image) for an image that is
// neither in the store nor built in.
var ErrNotFound = errors.New("image not found")

// ErrExists is returned by Import when the image exists and replace is off.
var ErrExists = errors.New("image already exists")

// DefaultPath is the PATH a container gets unless its image or spec sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

const (
	manifestFile = "manifest.json"
	rootfsDir    = "rootfs"
	tmpPrefix    = ".tmp-"
)

// Config holds an image's defaults for the container process, with the
// meaning they have in OCI image configs and Kubernetes: a container
// without command runs Entrypoint+Cmd; with args only, Entrypoint+args.
type Config struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
}

// Image is one image of the store.
type Image struct {
	// Name is the normalized name.
	Name string `json:"name"`
	// Rootfs is the absolute path of the unpacked root filesystem.
	Rootfs  string    `json:"-"`
	Created time.Time `json:"created"`
	Config  Config    `json:"config"`
}

// Store is a directory of images.
type Store struct {
	dir         string
	busyboxPath string
	mu          sync.Mutex // serializes builds of built-in images in this process
}

// Option configures a Store.
type Option func(*Store)

// WithBusybox sets the static busybox binary the built-in busybox image is
// made from (default /bin/busybox, as Debian's busybox-static installs it).
func WithBusybox(path string) Option {
	return func(s *Store) { s.busyboxPath = path }
}

// New returns the store kept in dir (created when first written).
func New(dir string, opts ...Option) *Store {
	s := &Store{dir: dir, busyboxPath: "/bin/busybox"}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

var (
	nameRE       = regexp.MustCompile(`^([a-z0-9][a-z0-9.-]*:[0-9]+/)?[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
	dockerHubREs = []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"}
)

// Normalize returns the store's name for an image reference: Docker Hub's
// registry host and its "library/" prefix are dropped, as is the ":latest"
// tag; other registries and tags are kept (ghcr.io/org/app:v1). Digests
// (@sha256:...) are refused since the store cannot verify them.
func Normalize(ref string) (string, error) {
	name := strings.TrimSpace(ref)
	if strings.Contains(name, "@") {
		return "", fmt.Errorf("image %q: digest references are not supported", ref)
	}
	for _, p := range dockerHubREs {
		if strings.HasPrefix(name, p) {
			name = strings.TrimPrefix(name[len(p):], "library/")
			break
		}
	}
	name = strings.TrimSuffix(name, ":latest")
	if len(name) > 255 || !nameRE.MatchString(name) || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.HasSuffix(name, "/") {
		return "", fmt.Errorf("invalid image name %q", ref)
	}
	return name, nil
}

// dirName maps a normalized name to a single path element; '+' cannot
// occur in names, so the mapping is reversible and collision free.
func dirName(name string) string { return strings.ReplaceAll(name, "/", "+") }

// Get returns the image named ref, building a built-in one on first use.
func (s *Store) Get(ctx context.Context, ref string) (Image, error) {
	name, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	img, err := s.read(name)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return img, err
	}
	build, ok := builtins[name]
	if !ok {
		return Image{}, fmt.Errorf("image %q (%s): %w in %s; add it with `allot image import %s ROOTFS.tar`",
			ref, name, ErrNotFound, s.dir, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if img, err := s.read(name); err == nil {
		return img, nil
	}
	if err := s.install(name, func(rootfs string) (Config, error) { return build(ctx, s, rootfs) }, false); err != nil &&
		!errors.Is(err, ErrExists) {
		return Image{}, fmt.Errorf("build built-in image %s: %w", name, err)
	}
	return s.read(name)
}

// read loads an installed image.
func (s *Store) read(name string) (Image, error) {
	dir := filepath.Join(s.dir, dirName(name))
	var img Image
	if err := atomicfile.ReadJSON(filepath.Join(dir, manifestFile), &img); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Image{}, fmt.Errorf("image %s: %w", name, ErrNotFound)
		}
		return Image{}, fmt.Errorf("read image %s: %w", name, err)
	}
	abs, err := filepath.Abs(filepath.Join(dir, rootfsDir))
	if err != nil {
		return Image{}, fmt.Errorf("resolve rootfs of %s: %w", name, err)
	}
	img.Rootfs = abs
	return img, nil
}

// List returns the installed images sorted by name (built-in images appear
// once they have been used).
func (s *Store) List() ([]Image, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []Image
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		img, err := s.read(strings.ReplaceAll(e.Name(), "+", "/"))
		if err != nil {
			continue // a foreign or broken directory is not an image
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Import unpacks the root filesystem tar (optionally gzip-compressed) at
// tarPath as image ref with the defaults cfg. An existing image is an
// ErrExists error unless replace is set.
func (s *Store) Import(ctx context.Context, ref, tarPath string, cfg Config, replace bool) (Image, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return Image{}, fmt.Errorf("open rootfs tar: %w", err)
	}
	defer f.Close()
	return s.ImportReader(ctx, ref, f, cfg, replace)
}

// ImportReader is Import reading the tar from r.
func (s *Store) ImportReader(ctx context.Context, ref string, r io.Reader, cfg Config, replace bool) (Image, error) {
	name, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	if _, err := s.read(name); err == nil && !replace {
		return Image{}, fmt.Errorf("import image %s: %w", name, ErrExists)
	}
	fill := func(rootfs string) (Config, error) {
		if err := extractTar(ctx, r, rootfs); err != nil {
			return Config{}, fmt.Errorf("unpack rootfs: %w", err)
		}
		return cfg, nil
	}
	if err := s.install(name, fill, replace); err != nil {
		return Image{}, fmt.Errorf("import image %s: %w", name, err)
	}
	return s.read(name)
}

// install builds an image in a temporary directory with fill and renames
// it into place, so the store never shows a partial image.
func (s *Store) install(name string, fill func(rootfs string) (Config, error), replace bool) (err error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create image store: %w", err)
	}
	tmp, err := os.MkdirTemp(s.dir, tmpPrefix+dirName(name)+"-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("remove temp dir: %w", rerr)
		}
	}()
	rootfs := filepath.Join(tmp, rootfsDir)
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fmt.Errorf("create rootfs: %w", err)
	}
	cfg, err := fill(rootfs)
	if err != nil {
		return err
	}
	img := Image{Name: name, Created: time.Now().UTC().Truncate(time.Second), Config: cfg}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, manifestFile), img); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return s.swapIn(tmp, filepath.Join(s.dir, dirName(name)), replace)
}

// swapIn renames the finished directory tmp to final. With replace, an
// existing image is first moved aside and removed once the new one is in.
func (s *Store) swapIn(tmp, final string, replace bool) error {
	var old string
	if _, err := os.Lstat(final); err == nil {
		if !replace {
			return ErrExists
		}
		old = tmp + "-old"
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("move old image aside: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if errors.Is(err, os.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return ErrExists // another process installed it first
		}
		return fmt.Errorf("install image: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove replaced image: %w", err)
		}
	}
	return nil
}
