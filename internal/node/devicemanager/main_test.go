package devicemanager

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// examplePlugin is the path of the example device plugin binary, built
// once for the package's tests.
var examplePlugin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dm-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	examplePlugin = filepath.Join(dir, "device-plugin")
	cmd := exec.Command("go", "build", "-o", examplePlugin, "allot.dev/allot/examples/device-plugin")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build example device plugin: %v\n", err)
		return 1
	}
	return m.Run()
}
