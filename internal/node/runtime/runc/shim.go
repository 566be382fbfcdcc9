package runc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"allot.dev/allot/internal/atomicfile"
)

// The shim is a small process per container, started by Start in its own
// session so that it survives the agent. It is the only process that can
// learn the container's exit status: runc create leaves the container's
// init orphaned, and as a child subreaper the shim becomes its parent and
// reaps it (the technique of containerd's shims). It reports to Start on
// file descriptor 3 ("ok", or "error: MESSAGE"), then waits.
const (
	readyFD       = 3
	createTimeout = 2 * time.Minute // runc create runs CDI hooks; give them time
	lockTimeout   = 2 * time.Second
	reasonUnknown = "ContainerStatusUnknown"
	// exitCodeUnknown is what the kubelet reports for a container whose
	// exit status was lost.
	exitCodeUnknown = 137
	// exitCodeStartError is the exit code of a container that never ran.
	exitCodeStartError = 128
)

// shimEnv is set in the environment of shims (and of the probe). New
// refuses to run where it is set, so a shim command that does not reach
// ShimMain (a test binary without the TestMain hook runs its tests
// instead) fails at once instead of recursing.
const shimEnv = "ALLOT_RUNC_SHIM"

// shimUsage is what ShimMain prints without arguments; probeShim looks
// for it.
const shimUsage = "usage: " + ShimCommandName + " BUNDLE"

// probeShim runs the shim command without a bundle and checks that it is
// ShimMain answering (usage, exit code 2): a binary that lacks the hidden
// command fails New with a clear error rather than every Start.
func probeShim(argv []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), shimEnv+"=1")
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 && strings.Contains(string(out), shimUsage) {
		return nil
	}
	return fmt.Errorf("runc shim command %q does not run the shim (register the hidden %q command, or call runc.ShimMain from TestMain): %v: %.200s",
		strings.Join(argv, " "), ShimCommandName, err, out)
}

// ShimMain is the body of the hidden `allot runc-shim BUNDLE` command and
// returns the process exit code. Run it only as Start does.
func ShimMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, shimUsage)
		return 2
	}
	// The shim must outlive terminal hang-ups and signals aimed at the
	// agent; only SIGKILL ends it early (and loses the exit status).
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	ready := os.NewFile(readyFD, "ready")
	if err := runShim(bundle(args[0]), ready); err != nil {
		fmt.Fprintf(os.Stderr, "%s runc-shim: %v\n", time.Now().Format(time.RFC3339), err)
		return 1
	}
	return 0
}

func runShim(b bundle, ready *os.File) error {
	lock, err := lockShim(b)
	if err != nil {
		report(ready, err)
		return err
	}
	defer lock.Close()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		err = fmt.Errorf("become child subreaper: %w", err)
		report(ready, err)
		return err
	}
	rec, err := b.load()
	if err != nil {
		report(ready, err)
		return err
	}
	pid, err := startContainer(b, rec)
	if err != nil {
		werr := atomicfile.WriteJSON(b.path(exitFile), exitRecord{
			ExitCode: exitCodeStartError, FinishedAt: time.Now(), Reason: "StartError", Message: err.Error(),
		})
		report(ready, err)
		return errors.Join(err, werr)
	}
	if err := atomicfile.WriteJSON(b.path(startedFile), started{PID: pid, StartedAt: time.Now()}); err != nil {
		report(ready, err)
		return err
	}
	report(ready, nil)
	var fenced atomic.Bool
	if rec.FenceFile != "" {
		stop := make(chan struct{})
		defer close(stop)
		go watchFence(rec.FenceFile, rec.FenceAfter, pid, &fenced, stop)
	}
	exit := waitInit(pid)
	if fenced.Load() {
		exit.Reason = ReasonFenced
		exit.Message = fmt.Sprintf("killed by its shim: the node agent's heartbeat %s was older than the fence time %s", rec.FenceFile, rec.FenceAfter)
	}
	return atomicfile.WriteJSON(b.path(exitFile), exit)
}

// ReasonFenced is the reason of a container its shim killed because the
// node agent's local heartbeat was older than the container's fence time.
const ReasonFenced = "NodeFenced"

// watchFence kills the container's init (and so its PID namespace) once
// the heartbeat file is older than after (or gone), checking every tenth
// of after (at most a second), until stop closes. The agent touches the
// file while it reaches the API server; this holds the fence while the
// agent is not running.
func watchFence(file string, after time.Duration, pid int, fenced *atomic.Bool, stop <-chan struct{}) {
	t := time.NewTicker(min(max(after/10, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			fi, err := os.Stat(file)
			if err == nil && now.Sub(fi.ModTime()) <= after {
				continue
			}
			why := fmt.Sprintf("it is %s old", now.Sub(fi.ModTime()).Round(time.Millisecond))
			if err != nil {
				why = err.Error()
			}
			fmt.Fprintf(os.Stderr, "%s runc-shim: fence: killing the container: heartbeat %s: %s (fence time %s)\n",
				now.Format(time.RFC3339), file, why, after)
			fenced.Store(true)
			_ = unix.Kill(pid, unix.SIGKILL)
			return
		}
	}
}

// lockShim takes the bundle's shim lock for the shim's whole life; its
// holder being alive is how the agent knows a shim still runs. A probe of
// the agent may hold a shared lock for an instant, hence the retries.
func lockShim(b bundle) (*os.File, error) {
	f, err := os.OpenFile(b.path(shimLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open shim lock: %w", err)
	}
	for deadline := time.Now().Add(lockTimeout); ; time.Sleep(5 * time.Millisecond) {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock bundle (another shim runs?): %w", err)
		}
	}
}

// report tells Start the outcome; Start may be gone (agent killed), so
// write errors do not matter.
func report(ready *os.File, err error) {
	msg := "ok\n"
	if err != nil {
		msg = "error: " + err.Error() + "\n"
	}
	_, _ = ready.WriteString(msg)
	_ = ready.Close()
}

// startContainer runs runc create (stdio on the log file, inherited by the
// container) and runc start, and returns the container init's PID.
func startContainer(b bundle, rec record) (int, error) {
	logf, err := openLog(rec.LogPath)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	c := cli{path: rec.Runc, root: rec.RuncRoot}
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	create := exec.CommandContext(ctx, c.path, "--root", c.root, "--log", b.path(runcLogFile),
		"--log-format", "json", "create", "--bundle", string(b), "--pid-file", b.path(initPidFile), rec.ID)
	create.Stdin, create.Stdout, create.Stderr = devnull, logf, logf
	create.Dir = string(b)
	if err := create.Run(); err != nil {
		cerr := c.delete(ctx, rec.ID)
		return 0, errors.Join(fmt.Errorf("runc create: %s", runcError(b, err)), cerr)
	}
	pid, err := b.initPID()
	if err != nil {
		return 0, errors.Join(err, c.delete(ctx, rec.ID))
	}
	if _, err := c.run(ctx, "start", rec.ID); err != nil {
		cerr := c.delete(ctx, rec.ID)
		_ = waitInit(pid) // reap the killed init
		return 0, errors.Join(err, cerr)
	}
	return pid, nil
}

// openLog opens the container's log file for appending.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}

// runcError is the last error runc logged (its JSON log holds the reason,
// such as a missing executable), else err itself.
func runcError(b bundle, err error) string {
	f, ferr := os.Open(b.path(runcLogFile))
	if ferr != nil {
		return err.Error()
	}
	defer f.Close()
	msg := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Level == "error" && line.Msg != "" {
			msg = line.Msg
		}
	}
	if msg == "" {
		return err.Error()
	}
	return msg
}

// waitInit reaps the container's init, whose parent the shim became, and
// turns its wait status into an exit record.
func waitInit(pid int) exitRecord {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		now := time.Now()
		switch {
		case err != nil:
			return waitGone(pid, err)
		case ws.Exited():
			return exitRecord{ExitCode: int32(ws.ExitStatus()), FinishedAt: now, Reason: exitReason(ws.ExitStatus())}
		case ws.Signaled():
			sig := int32(ws.Signal())
			return exitRecord{ExitCode: 128 + sig, Signal: sig, FinishedAt: now, Reason: "Error"}
		}
	}
}

// waitGone handles an init that is not the shim's child (which should not
// happen): wait until it is gone; its status is unknown.
func waitGone(pid int, werr error) exitRecord {
	for unix.Kill(pid, 0) == nil {
		time.Sleep(100 * time.Millisecond)
	}
	return exitRecord{ExitCode: exitCodeUnknown, FinishedAt: time.Now(), Reason: reasonUnknown,
		Message: fmt.Sprintf("cannot wait for the container's process: %v", werr)}
}

func exitReason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}
