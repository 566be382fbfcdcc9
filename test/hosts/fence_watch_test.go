package hosts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnitWatch: the watch of the fabric plugins' records reports a unit
// attached on two nodes at once (claim directories with the same unit
// file), and nothing for units on one node each. It needs no hosts.
func TestUnitWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		units [2]string // the unit node i holds, for a claim of its own
		want  string    // part of the one violation, "" for none
	}{
		{"one unit on two nodes", [2]string{"shared-0", "shared-0"}, "unit shared-0 attached on n1 (claim claim-1) and n0 (claim claim-0) at once"},
		{"two units", [2]string{"shared-0", "shared-1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*node
			for i, unit := range tc.units {
				n := &node{name: fmt.Sprintf("n%d", i), attach: t.TempDir()}
				dir := filepath.Join(n.attach, fmt.Sprintf("claim-%d", i))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, unit), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, n)
			}
			w := startUnitWatch(t, nodes)
			waitFor(t, 10*time.Second, "a sample", func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.samples > 0
			})
			seen, _ := w.stop()
			switch {
			case tc.want == "" && len(seen) > 0:
				t.Errorf("violations %q, want none", seen)
			case tc.want != "" && (len(seen) != 1 || !strings.Contains(seen[0], tc.want)):
				t.Errorf("violations %q, want one with %q", seen, tc.want)
			}
		})
	}
}
