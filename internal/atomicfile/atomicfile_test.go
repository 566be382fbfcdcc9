package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
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
