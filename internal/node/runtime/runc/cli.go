package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// callTimeout bounds every runc invocation whose context has no earlier
// deadline; runc commands other than create/start finish in milliseconds.
const callTimeout = 30 * time.Second

// errNoContainer is runc's "container does not exist".
var errNoContainer = errors.New("runc container does not exist")

// errNotRunning is runc kill's "container not running" (or its process
// already finished).
var errNotRunning = errors.New("runc container not running")

// cli runs the runc binary with a fixed state directory.
type cli struct {
	path string // runc binary
	root string // runc --root
}

// runcState is the part of `runc state`/`runc list -f json` used here.
type runcState struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Status string `json:"status"` // creating, created, running, paused, stopped
}

// run runs `runc --root ROOT args...` and returns its stdout; the error
// carries runc's stderr.
func (c cli) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, append([]string{"--root", c.root}, args...)...)
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		switch {
		case strings.Contains(msg, "does not exist"):
			return out, fmt.Errorf("runc %s: %w", args[0], errNoContainer)
		case strings.Contains(msg, "not running"), strings.Contains(msg, "process already finished"):
			return out, fmt.Errorf("runc %s: %w", args[0], errNotRunning)
		case msg != "":
			return out, fmt.Errorf("runc %s: %s: %w", args[0], msg, err)
		}
		return out, fmt.Errorf("runc %s: %w", args[0], err)
	}
	return out, nil
}

// state is `runc state ID`.
func (c cli) state(ctx context.Context, id string) (runcState, error) {
	out, err := c.run(ctx, "state", id)
	if err != nil {
		return runcState{}, err
	}
	var s runcState
	if err := json.Unmarshal(out, &s); err != nil {
		return runcState{}, fmt.Errorf("decode runc state: %w", err)
	}
	return s, nil
}

// list is `runc list -f json`, keyed by container ID.
func (c cli) list(ctx context.Context) (map[string]runcState, error) {
	out, err := c.run(ctx, "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var states []runcState
	if err := json.Unmarshal(out, &states); err != nil {
		return nil, fmt.Errorf("decode runc list: %w", err)
	}
	m := make(map[string]runcState, len(states))
	for _, s := range states {
		m[s.ID] = s
	}
	return m, nil
}

// kill sends sig (a name such as TERM or KILL) to the container's init.
func (c cli) kill(ctx context.Context, id, sig string) error {
	_, err := c.run(ctx, "kill", id, sig)
	return err
}

// delete force-deletes the container; a missing one is not an error.
func (c cli) delete(ctx context.Context, id string) error {
	_, err := c.run(ctx, "delete", "--force", id)
	if errors.Is(err, errNoContainer) {
		return nil
	}
	return err
}

// version is the first line of `runc --version` without its "runc
// version " prefix.
func (c cli) version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("run runc --version: %w", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "runc version")), nil
}
