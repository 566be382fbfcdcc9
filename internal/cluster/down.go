package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"allot.dev/allot/internal/node/runtime"
	"allot.dev/allot/internal/node/runtime/runc"
)

// DownOptions configure Down.
type DownOptions struct {
	// DataDir is the cluster's data dir (allot up --data-dir).
	DataDir string
	// NodeRootDir is its local node's root dir when it was not
	// DATA-DIR/node (allot up --node-root-dir).
	NodeRootDir string
	// GracePeriod is the time between SIGTERM and SIGKILL for each
	// running container.
	GracePeriod time.Duration
	Logger      *slog.Logger
}

// DownReport is what Down did.
type DownReport struct {
	Stopped   int // running containers stopped (and their shims ended)
	Removed   int // containers that never started, removed
	Released  int // containers whose rootfs was unmounted
	Forgotten int // containers deleted from runc's state (runc delete)
	Unmounts  int // other mounts under the directories, detached
	Sockets   int // unix sockets nothing listens on, removed
}

func (r DownReport) String() string {
	if r == (DownReport{}) {
		return "nothing to clean up"
	}
	return fmt.Sprintf("stopped %s, removed %s, unmounted %s and %s, removed %s, deleted %s from runc",
		count(r.Stopped, "container"), count(r.Removed, "unstarted container"), count(r.Released, "container filesystem"),
		count(r.Unmounts, "other mount"), count(r.Sockets, "stale socket"), count(r.Forgotten, "container record"))
}

// count is "1 thing" or "N things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// Down cleans what a cluster's data dir was left with when its allot up
// was killed (kill -9, a crash): it stops the local node's runc containers
// (their shims exit with them), unmounts their root filesystems and any
// other mount under the data and node root dirs, and removes the unix
// sockets nothing listens on (device plugins', DRA drivers', the
// PodResources API's). It deletes every container from the runc state of
// the node root dir (NODE-ROOT/runc, the runc --root only this data dir's
// node uses), so `runc list` shows none of them; containers of other runc
// roots are never touched. The bundles (exit records, logs), claims and
// etcd data stay: the
// next allot up starts the pods again per their restart policy. It fails,
// touching nothing, while a process holds the data dir.
func Down(ctx context.Context, o DownOptions) (DownReport, error) {
	var rep DownReport
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if _, err := os.Stat(filepath.Join(o.DataDir, "lock")); err != nil {
		return rep, fmt.Errorf("%s is not an allot data dir (no lock file): %w", o.DataDir, err)
	}
	release, err := lockDataDir(o.DataDir)
	if err != nil {
		return rep, fmt.Errorf("%w; stop it first (Ctrl-C, or kill that pid)", err)
	}
	defer release()
	if o.NodeRootDir == "" {
		o.NodeRootDir = filepath.Join(o.DataDir, "node")
	}
	if err := stopNodeContainers(ctx, o, &rep); err != nil {
		return rep, err
	}
	dirs := []string{o.DataDir, o.NodeRootDir}
	n, err := unmountUnder(dirs)
	rep.Unmounts += n
	if err != nil {
		return rep, err
	}
	n, err = removeStaleSockets(dirs)
	rep.Sockets += n
	return rep, err
}

// stopNodeContainers stops and releases the runc containers under the
// node root dir, if it has any.
func stopNodeContainers(ctx context.Context, o DownOptions, rep *DownReport) error {
	if _, err := os.Stat(filepath.Join(o.NodeRootDir, "containers")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	rt, err := runc.New(runc.Options{RootDir: o.NodeRootDir, Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("open the node's containers in %s: %w", o.NodeRootDir, err)
	}
	cs, err := rt.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		switch c.State {
		case runtime.StateCreated:
			if err := rt.Remove(ctx, c.ID); err != nil {
				errs = append(errs, err)
			} else {
				rep.Removed++
			}
			continue
		case runtime.StateRunning, runtime.StateUnknown:
			if err := rt.Stop(ctx, c.ID, o.GracePeriod); err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Stopped++
		}
		mounted, err := isMountPoint(filepath.Join(o.NodeRootDir, "containers", c.ID, "rootfs"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := rt.Release(ctx, c.ID); err != nil {
			errs = append(errs, err)
		} else if mounted {
			rep.Released++
		}
	}
	// Last, once every container was stopped gracefully; one a failed stop
	// left running is killed here.
	n, err := rt.PurgeRuncState(ctx)
	rep.Forgotten += n
	errs = append(errs, err)
	return errors.Join(errs...)
}

// mountPoints lists this mount namespace's mount points, from
// /proc/self/mountinfo (field 5, octal escapes decoded).
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountPath(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	return out, nil
}

// unescapeMountPath decodes mountinfo's \NNN octal escapes (space, tab,
// newline, backslash).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isMountPoint(path string) (bool, error) {
	mps, err := mountPoints()
	if err != nil {
		return false, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	return slices.Contains(mps, abs), nil
}

// unmountUnder detaches every mount at or below the dirs, deepest first.
func unmountUnder(dirs []string) (int, error) {
	mps, err := mountPoints()
	if err != nil {
		return 0, err
	}
	var under []string
	for _, mp := range mps {
		for _, d := range dirs {
			abs, err := filepath.Abs(d)
			if err != nil {
				return 0, err
			}
			if mp == abs || strings.HasPrefix(mp, abs+"/") {
				under = append(under, mp)
				break
			}
		}
	}
	slices.SortFunc(under, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	under = slices.Compact(under)
	n := 0
	var errs []error
	for _, mp := range under {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// removeStaleSockets removes the unix sockets under the dirs that refuse
// connections: their servers are gone.
func removeStaleSockets(dirs []string) (int, error) {
	n := 0
	var errs []error
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.Type()&fs.ModeSocket == 0 {
				return nil
			}
			c, err := net.DialTimeout("unix", path, time.Second)
			if err == nil {
				c.Close()
				return nil // something serves it
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				return nil
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				return nil
			}
			n++
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
