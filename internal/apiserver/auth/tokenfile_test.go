package auth

import (
	"errors"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEnsureTokensCreatesAndKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki", "tokens.csv")
	first, err := EnsureTokens(path, []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"admin", "controller-manager", "n1", "n2", "scheduler"}
	if got := slices.Sorted(maps.Keys(first)); !slices.Equal(got, wantNames) {
		t.Fatalf("names = %v, want %v", got, wantNames)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	again, err := EnsureTokens(path, []string{"n2", "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(first, again) {
		t.Errorf("second call changed tokens: %v vs %v", first, again)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("second call rewrote the file")
	}

	grown, err := EnsureTokens(path, []string{"n1", "n3"})
	if err != nil {
		t.Fatal(err)
	}
	if grown["n1"] != first["n1"] || grown["admin"] != first["admin"] || grown["n3"] == "" {
		t.Errorf("adding n3: got %v, first %v", grown, first)
	}

	a, err := NewTokenAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]User{
		first["admin"]:              {AdminName, RoleAdmin},
		first["scheduler"]:          {SchedulerName, RoleScheduler},
		first["controller-manager"]: {ControllerManagerName, RoleControllerManager},
		first["n2"]:                 {"n2", RoleNode},
		grown["n3"]:                 {"n3", RoleNode},
	}
	for tok, want := range checks {
		if u, ok := a.AuthenticateRequest(bearer("Bearer " + tok)); !ok || u != want {
			t.Errorf("token of %v: got %+v, %v", want, u, ok)
		}
	}
}

func TestEnsureTokensKeepsHandWrittenTokens(t *testing.T) {
	path := writeTokens(t, "# mine\nmy-admin-token,admin,admin\nother,alice,user\n")
	got, err := EnsureTokens(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got["admin"] != "my-admin-token" {
		t.Errorf("admin token = %q, want the existing one", got["admin"])
	}
	if _, ok := got["alice"]; ok {
		t.Errorf("returned a token of an identity it does not manage")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# mine\nmy-admin-token,admin,admin\nother,alice,user\n") {
		t.Errorf("existing content not kept:\n%s", data)
	}
}

func TestEnsureTokensErrors(t *testing.T) {
	cases := map[string]struct {
		existing string
		nodes    []string
		wantErr  string
		wantIs   error
	}{
		"node named admin":     {nodes: []string{"admin"}, wantIs: ErrInvalidIdentity},
		"node named scheduler": {nodes: []string{"scheduler"}, wantIs: ErrInvalidIdentity},
		"repeated node":        {nodes: []string{"n1", "n1"}, wantIs: ErrInvalidIdentity},
		"bad node name":        {nodes: []string{"N1"}, wantIs: ErrInvalidIdentity},
		"broken file":          {existing: "a,b\n", wantErr: "line 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.csv")
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := EnsureTokens(path, tc.nodes)
			if err == nil {
				t.Fatal("EnsureTokens succeeded")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("err = %v, want %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestEnsureTokensDrivers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	got, err := EnsureTokens(path, []string{"n1"}, "gpu.example.com")
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewTokenAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api", nil)
	r.Header.Set("Authorization", "Bearer "+got["gpu.example.com"])
	if u, ok := a.AuthenticateRequest(r); !ok || u != (User{"gpu.example.com", RoleDriver}) {
		t.Errorf("driver token authenticates as %v (%v), want driver gpu.example.com", u, ok)
	}
	if _, err := EnsureTokens(path, []string{"n1"}, "n1"); !errors.Is(err, ErrInvalidIdentity) {
		t.Errorf("driver named like a node: err = %v, want ErrInvalidIdentity", err)
	}
	if _, err := EnsureTokens(path, nil, "Not_A_Name"); !errors.Is(err, ErrInvalidIdentity) {
		t.Errorf("invalid driver name: err = %v, want ErrInvalidIdentity", err)
	}
}
