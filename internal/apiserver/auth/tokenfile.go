package auth

import (
	"allot.dev/allot/internal/atomicfile"

	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// tokenBytes is the entropy of a generated token; it is written as hex.
const tokenBytes = 32

// Names of the control-plane identities EnsureTokens creates.
const (
	AdminName             = "admin"
	SchedulerName         = "scheduler"
	ControllerManagerName = "controller-manager"
)

// fileMu serialises read-modify-write cycles on tokens files within this
// process. Writers in other processes are not excluded.
var fileMu sync.Mutex

// AppendToken generates a random token for name and role, appends it to the
// tokens file at path (creating the file if missing) and returns it. The
// file is replaced atomically with mode 0600. It refuses to extend a file
// that does not parse, so that a typo is fixed rather than buried.
func AppendToken(path string, name string, role Role) (token string, err error) {
	if err := validateIdentity(name, role); err != nil {
		return "", err
	}
	fileMu.Lock()
	defer fileMu.Unlock()
	data, _, err := readTokensFile(path)
	if err != nil {
		return "", err
	}
	token, err = newToken()
	if err != nil {
		return "", err
	}
	data = appendTokenLine(data, token, User{Name: name, Role: role})
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write tokens: %w", err)
	}
	return token, nil
}

// EnsureTokens makes sure the tokens file at path has a token for each
// identity `allot up` needs: admin, scheduler and controller-manager (named
// after their roles), one node token per name in nodes and one driver token
// per name in drivers. Identities the file already has keep their first
// token; missing ones get a new token appended. It returns name -> token for
// those identities only. Names must be distinct across roles, since the map
// is keyed by name.
func EnsureTokens(path string, nodes []string, drivers ...string) (map[string]string, error) {
	want := []User{
		{Name: AdminName, Role: RoleAdmin},
		{Name: SchedulerName, Role: RoleScheduler},
		{Name: ControllerManagerName, Role: RoleControllerManager},
	}
	taken := map[string]bool{AdminName: true, SchedulerName: true, ControllerManagerName: true}
	add := func(name string, role Role) error {
		if err := validateIdentity(name, role); err != nil {
			return err
		}
		if taken[name] {
			return fmt.Errorf("%w: %s name %q is repeated or names another identity", ErrInvalidIdentity, role, name)
		}
		taken[name] = true
		want = append(want, User{Name: name, Role: role})
		return nil
	}
	for _, n := range nodes {
		if err := add(n, RoleNode); err != nil {
			return nil, err
		}
	}
	for _, d := range drivers {
		if err := add(d, RoleDriver); err != nil {
			return nil, err
		}
	}

	fileMu.Lock()
	defer fileMu.Unlock()
	data, entries, err := readTokensFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(want))
	changed := false
	for _, u := range want {
		if tok, ok := findToken(entries, u); ok {
			out[u.Name] = tok
			continue
		}
		tok, err := newToken()
		if err != nil {
			return nil, err
		}
		data = appendTokenLine(data, tok, u)
		out[u.Name] = tok
		changed = true
	}
	if !changed {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create tokens dir: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("write tokens: %w", err)
	}
	return out, nil
}

// readTokensFile returns the file's content and entries; a missing file is
// empty.
func readTokensFile(path string) ([]byte, []tokenEntry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read tokens: %w", err)
	}
	entries, err := parseTokens(data)
	if err != nil {
		return nil, nil, fmt.Errorf("parse tokens %s: %w", path, err)
	}
	return data, entries, nil
}

func findToken(entries []tokenEntry, u User) (string, bool) {
	for _, e := range entries {
		if e.user == u {
			return e.token, true
		}
	}
	return "", false
}

func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func appendTokenLine(data []byte, token string, u User) []byte {
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	return fmt.Appendf(data, "%s,%s,%s\n", token, u.Name, u.Role)
}
