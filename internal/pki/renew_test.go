package pki

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	write(t, to, string(readFile(t, from)))
}

var regenHosts = []string{"api.example.test", "10.1.2.3"}

// regenerationCases say when EnsureServingCert keeps the certificate issued
// for regenHosts and when it issues a new one.
var regenerationCases = map[string]struct {
	// change runs after a first certificate for regenHosts was issued.
	change  func(t *testing.T, dir string, ca *CA) *CA
	hosts   []string
	reissue bool
}{
	"same hosts":              {hosts: regenHosts},
	"same hosts, other order": {hosts: []string{"10.1.2.3", "API.example.test", "localhost", "10.1.2.3"}},
	"host added":              {hosts: append([]string{"api2.example.test"}, regenHosts...), reissue: true},
	"host removed":            {hosts: regenHosts[:1], reissue: true},
	"ip changed":              {hosts: []string{"api.example.test", "10.1.2.4"}, reissue: true},
	"key file missing": {
		hosts:   regenHosts,
		change:  func(t *testing.T, dir string, ca *CA) *CA { remove(t, filepath.Join(dir, ServingKeyFile)); return ca },
		reissue: true,
	},
	"cert file garbage": {
		hosts: regenHosts,
		change: func(t *testing.T, dir string, ca *CA) *CA {
			write(t, filepath.Join(dir, ServingCertFile), "x")
			return ca
		},
		reissue: true,
	},
	"key of another pair": {
		hosts: regenHosts,
		change: func(t *testing.T, dir string, ca *CA) *CA {
			other := t.TempDir()
			if _, _, err := ca.EnsureServingCert(other, regenHosts); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, ServingKeyFile), filepath.Join(dir, ServingKeyFile))
			return ca
		},
		reissue: true,
	},
	"expires within 30 days": {
		hosts: regenHosts,
		change: func(t *testing.T, dir string, ca *CA) *CA {
			s, err := newSANSet(slices.Concat(regenHosts, defaultHosts))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if err := ca.issueServingCert(filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile), s, now, now.Add(29*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			return ca
		},
		reissue: true,
	},
	"new CA": {
		hosts: regenHosts,
		change: func(t *testing.T, dir string, ca *CA) *CA {
			return mustCA(t, t.TempDir())
		},
		reissue: true,
	},
}

func TestServingCertRegeneration(t *testing.T) {
	for name, tc := range regenerationCases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ca := mustCA(t, dir)
			certFile, _, err := ca.EnsureServingCert(dir, regenHosts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				ca = tc.change(t, dir, ca)
			}
			before, err := os.ReadFile(certFile)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureServingCert(dir, tc.hosts); err != nil {
				t.Fatal(err)
			}
			after := readFile(t, certFile)
			if reissued := !bytes.Equal(before, after); reissued != tc.reissue {
				t.Fatalf("reissued = %v, want %v", reissued, tc.reissue)
			}
			cert, err := parseCertPEM(after)
			if err != nil {
				t.Fatal(err)
			}
			want, err := newSANSet(slices.Concat(tc.hosts, defaultHosts))
			if err != nil {
				t.Fatal(err)
			}
			if got := sanSetOf(cert); !got.equal(want) {
				t.Errorf("SANs = %+v, want %+v", got, want)
			}
			if ok, err := ca.servingCertValid(certFile, filepath.Join(dir, ServingKeyFile), want, time.Now()); err != nil || !ok {
				t.Errorf("resulting certificate not valid: %v, %v", ok, err)
			}
		})
	}
}
