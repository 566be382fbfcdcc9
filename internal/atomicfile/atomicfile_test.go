package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAndRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	var v struct{ A int }
	if err := ReadJSON(p, &v); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadJSON of a missing file: %v", err)
	}
	for _, a := range []int{1, 2} {
		if err := WriteJSON(p, struct{ A int }{a}); err != nil {
			t.Fatal(err)
		}
		if err := ReadJSON(p, &v); err != nil || v.A != a {
			t.Fatalf("ReadJSON = %+v, %v", v, err)
		}
	}
	if err := WriteFileNoSync(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(p, &v); err == nil {
		t.Fatal("ReadJSON of bad JSON succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

// TestChecksummed: what WriteChecksummed wrote reads back; a missing file
// is fs.ErrNotExist, and a truncated or altered one ErrCorrupt.
func TestChecksummed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "cp")
	type rec struct{ A, B string }
	if err := WriteChecksummed(path, rec{"x", "y"}); err != nil {
		t.Fatal(err)
	}
	var got rec
	if err := ReadChecksummed(path, &got); err != nil || got != (rec{"x", "y"}) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := ReadChecksummed(path+".missing", &got); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)/2],
		"altered":   []byte(strings.Replace(string(data), `"x"`, `"z"`, 1)),
		"not data":  []byte(`{"data":1,"checksum":"` + checksum([]byte("1")) + `"}`),
	} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := ReadChecksummed(path, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s file: %v, want ErrCorrupt", name, err)
		}
	}
}
