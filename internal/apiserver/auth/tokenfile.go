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
// after their roles) and one node token per name in nodes. Identities the
// file already has keep their first token; missing ones get a new token
// appended. It returns name -> token for those identities only. A node may
// not be named like a control-plane identity, since the map is keyed by name.
func EnsureTokens(path string, nodes []string) (map[string]string, error) {
	want := []User{
		{Name: AdminName, Role: RoleAdmin},
		{Name: SchedulerName, Role: RoleScheduler},
		{Name: ControllerManagerName, Role: RoleControllerManager},
	}
	taken := map[string]bool{AdminName: true, SchedulerName: true, ControllerManagerName: true}
	for _, n := range nodes {
		if err := validateIdentity(n, RoleNode); err != nil {
			return nil, err
		}
		if taken[n] {
			return nil, fmt.Errorf("%w: node name %q is repeated or names a control-plane identity", ErrInvalidIdentity, n)
		}
		taken[n] = true
		want = append(want, User{Name: n, Role: RoleNode})
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
