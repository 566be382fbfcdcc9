package runc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"allot.dev/allot/internal/atomicfile"
	rt "allot.dev/allot/internal/node/runtime"
)

// Files of a container's bundle directory ROOT/containers/ID. The agent
// writes record and config at Create; the shim writes everything else.
const (
	recordFile  = "container.json" // record: identity and how to run it
	configFile  = "config.json"    // the OCI runtime spec
	rootfsName  = "rootfs"         // overlay mountpoint (overlay mode)
	upperName   = "upper"          // overlay upper dir (overlay mode)
	workName    = "work"           // overlay work dir (overlay mode)
	runcLogFile = "runc.log"       // runc's own log (JSON lines)
	shimLogFile = "shim.log"       // the shim's stdout and stderr
	shimLock    = "shim.lock"      // flock held by the shim while it lives
	initPidFile = "init.pid"       // written by runc create
	startedFile = "started.json"   // started: written by the shim after runc start
	exitFile    = "exit.json"      // exitRecord: written by the shim after reaping
)

// record is what the runtime keeps of a container beside its OCI spec, so
// that a restarted agent (and the shim) know everything from disk alone.
type record struct {
	ID           string    `json:"id"`
	PodUID       string    `json:"podUID"`
	PodNamespace string    `json:"podNamespace"`
	PodName      string    `json:"podName"`
	Name         string    `json:"name"`
	Attempt      int       `json:"attempt"`
	Image        string    `json:"image"`
	LogPath      string    `json:"logPath"`
	CreatedAt    time.Time `json:"createdAt"`
	// Overlay is true when rootfs/ is a per-container overlay mount, false
	// when the image rootfs is used read-only.
	Overlay bool `json:"overlay"`
	// Runc and RuncRoot are the binary and its --root, for the shim.
	Runc     string `json:"runc"`
	RuncRoot string `json:"runcRoot"`
	// FenceFile and FenceAfter are the container's fence
	// (runtime.ContainerSpec.Fence): the shim kills the container once
	// FenceFile's modification time is older than FenceAfter.
	FenceFile  string        `json:"fenceFile,omitempty"`
	FenceAfter time.Duration `json:"fenceAfter,omitempty"`
}

// started is written by the shim once `runc start` succeeded.
type started struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// exitRecord is written by the shim once the container's init was reaped,
// or when starting failed (Reason StartError).
type exitRecord struct {
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
}

// bundle is one container's directory.
type bundle string

func (b bundle) path(name string) string { return filepath.Join(string(b), name) }

// id is the container ID, the bundle directory's name.
func (b bundle) id() string { return filepath.Base(string(b)) }

// load reads the record; ErrNotFound if the container does not exist.
func (b bundle) load() (record, error) {
	var r record
	if err := atomicfile.ReadJSON(b.path(recordFile), &r); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return record{}, rt.ErrNotFound
		}
		return record{}, fmt.Errorf("read container record: %w", err)
	}
	return r, nil
}

// started returns the start record, ok=false if absent.
func (b bundle) started() (started, bool) {
	var s started
	ok := readOptional(b.path(startedFile), &s)
	return s, ok
}

// exited returns the exit record, ok=false if absent.
func (b bundle) exited() (exitRecord, bool) {
	var e exitRecord
	ok := readOptional(b.path(exitFile), &e)
	return e, ok
}

// readOptional decodes a file the shim writes atomically; absent or
// unreadable means "not yet".
func readOptional(path string, v any) bool {
	return atomicfile.ReadJSON(path, v) == nil
}

// shimAlive reports whether a shim holds the bundle's lock. A flock dies
// with its holder, so this cannot be fooled by PID reuse. The probe takes
// a shared lock, which coexists with other probes and conflicts only with
// the shim's exclusive one.
func (b bundle) shimAlive() bool {
	f, err := os.Open(b.path(shimLock))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// initPID reads the PID file runc create wrote.
func (b bundle) initPID() (int, error) {
	data, err := os.ReadFile(b.path(initPidFile))
	if err != nil {
		return 0, fmt.Errorf("read init pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("parse init pid %q", data)
	}
	return pid, nil
}

// status is a status with the record's identity fields filled in.
func (r record) status() rt.ContainerStatus {
	return rt.ContainerStatus{
		ID:           r.ID,
		PodUID:       r.PodUID,
		PodNamespace: r.PodNamespace,
		PodName:      r.PodName,
		Name:         r.Name,
		Attempt:      r.Attempt,
		CreatedAt:    r.CreatedAt,
	}
}
