package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Role is what an identity may do; see the package doc for each role's rules.
type Role string

// Roles of the tokens file.
const (
	RoleAdmin             Role = "admin"
	RoleUser              Role = "user"
	RoleScheduler         Role = "scheduler"
	RoleControllerManager Role = "controller-manager"
	RoleNode              Role = "node"
	RoleDriver            Role = "driver"
	// RoleNodeDriver is a driver's credential for one node: its name is
	// DRIVER@NODE.
	RoleNodeDriver Role = "node-driver"
)

// ErrInvalidIdentity is returned (wrapped) for a name or role the tokens file
// cannot hold.
var ErrInvalidIdentity = errors.New("invalid identity")

func (r Role) valid() bool {
	switch r {
	case RoleAdmin, RoleUser, RoleScheduler, RoleControllerManager, RoleNode, RoleDriver, RoleNodeDriver:
		return true
	}
	return false
}

// User is an authenticated caller. For RoleNode, Name is the node's name;
// for RoleDriver, the driver's name; for RoleNodeDriver, DRIVER@NODE.
type User struct {
	Name string
	Role Role
}

// Driver returns the driver of a node-driver (the part of the name before
// the "@"), "" for other roles.
func (u User) Driver() string {
	if u.Role != RoleNodeDriver {
		return ""
	}
	d, _, _ := strings.Cut(u.Name, "@")
	return d
}

// Node returns the node of a node-driver (the part of the name after the
// "@"), "" for other roles.
func (u User) Node() string {
	if u.Role != RoleNodeDriver {
		return ""
	}
	_, n, _ := strings.Cut(u.Name, "@")
	return n
}

// validateIdentity checks that name and role can be written to and read back
// from the tokens file, that node and driver names are DNS subdomains, and
// that a node-driver's name is DRIVER@NODE with both halves DNS subdomains.
func validateIdentity(name string, role Role) error {
	if !role.valid() {
		return fmt.Errorf("%w: unknown role %q", ErrInvalidIdentity, role)
	}
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidIdentity)
	}
	if role == RoleNodeDriver {
		driver, node, ok := strings.Cut(name, "@")
		if !ok {
			return fmt.Errorf("%w: node-driver name %q is not DRIVER@NODE", ErrInvalidIdentity, name)
		}
		for _, part := range []struct{ what, v string }{{"driver", driver}, {"node", node}} {
			if errs := validation.IsDNS1123Subdomain(part.v); len(errs) > 0 {
				return fmt.Errorf("%w: node-driver name %q: %s %q: %s", ErrInvalidIdentity, name, part.what, part.v, strings.Join(errs, "; "))
			}
		}
		return nil
	}
	if role == RoleNode || role == RoleDriver {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("%w: %s name %q: %s", ErrInvalidIdentity, role, name, strings.Join(errs, "; "))
		}
		return nil
	}
	if name != strings.TrimSpace(name) || strings.ContainsRune(name, ',') || strings.ContainsFunc(name, unicode.IsControl) {
		return fmt.Errorf("%w: name %q has a comma, a control character or surrounding space", ErrInvalidIdentity, name)
	}
	return nil
}

// tokenEntry is one parsed line of the tokens file.
type tokenEntry struct {
	token string
	user  User
}

// parseTokens parses a tokens file. Errors name the line but never quote it:
// the line holds a secret.
func parseTokens(data []byte) ([]tokenEntry, error) {
	var entries []tokenEntry
	seen := make(map[string]int)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want 3 fields token,name,role, got %d", n, len(fields))
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		token, name, role := fields[0], fields[1], Role(fields[2])
		if token == "" || strings.ContainsFunc(token, unicode.IsSpace) {
			return nil, fmt.Errorf("line %d: token is empty or has spaces", n)
		}
		if err := validateIdentity(name, role); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if prev, ok := seen[token]; ok {
			return nil, fmt.Errorf("line %d: token repeats line %d", n, prev)
		}
		seen[token] = n
		entries = append(entries, tokenEntry{token: token, user: User{Name: name, Role: role}})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scan tokens: %w", err)
	}
	return entries, nil
}

// tokenTable is one immutable generation of loaded tokens.
type tokenTable struct {
	byHash map[[sha256.Size]byte]User
}

func newTokenTable(entries []tokenEntry) *tokenTable {
	t := &tokenTable{byHash: make(map[[sha256.Size]byte]User, len(entries))}
	for _, e := range entries {
		t.byHash[sha256.Sum256([]byte(e.token))] = e.user
	}
	return t
}

// TokenAuthenticator maps bearer tokens to users. It is safe for concurrent
// use; Run, if called, keeps it in step with the file.
type TokenAuthenticator struct {
	path   string
	logger *slog.Logger
	tokens atomic.Pointer[tokenTable]

	// Owned by the goroutine that calls Run.
	lastSum      [sha256.Size]byte
	pollInterval time.Duration
	debounce     time.Duration
}

// NewTokenAuthenticator loads the tokens file at path. A nil logger discards
// logs.
func NewTokenAuthenticator(path string, logger *slog.Logger) (*TokenAuthenticator, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &TokenAuthenticator{
		path:         path,
		logger:       logger.With("file", path),
		pollInterval: time.Second,
		debounce:     50 * time.Millisecond,
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	entries, err := parseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("parse tokens %s: %w", path, err)
	}
	a.tokens.Store(newTokenTable(entries))
	a.lastSum = sha256.Sum256(data)
	a.warnIfReadable()
	return a, nil
}

// warnIfReadable logs when the tokens file is open to group or others.
func (a *TokenAuthenticator) warnIfReadable() {
	fi, err := os.Stat(a.path)
	if err != nil {
		a.logger.Warn("stat tokens file", "err", err)
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		a.logger.Warn("tokens file is readable by others; want mode 0600", "mode", fmt.Sprintf("%#o", perm))
	}
}

// AuthenticateRequest returns the user of the request's
// "Authorization: Bearer TOKEN" header. ok is false when the header is
// missing, malformed or names no known token.
func (a *TokenAuthenticator) AuthenticateRequest(r *http.Request) (u User, ok bool) {
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return User{}, false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return User{}, false
	}
	u, ok = a.tokens.Load().byHash[sha256.Sum256([]byte(token))]
	return u, ok
}

// reload re-reads the file and swaps in its tokens. A file that cannot be
// read or parsed leaves the current tokens in place. Unchanged content is
// not parsed again, so callers may reload on any hint of a change.
func (a *TokenAuthenticator) reload() {
	data, err := os.ReadFile(a.path)
	if err != nil {
		a.logger.Error("reload tokens; keeping previous tokens", "err", err)
		return
	}
	sum := sha256.Sum256(data)
	if sum == a.lastSum {
		return
	}
	a.lastSum = sum
	entries, err := parseTokens(data)
	if err != nil {
		a.logger.Error("reload tokens; keeping previous tokens", "err", err)
		return
	}
	a.tokens.Store(newTokenTable(entries))
	a.logger.Info("reloaded tokens", "tokens", len(entries))
	a.warnIfReadable()
}
