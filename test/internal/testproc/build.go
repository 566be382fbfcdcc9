package testproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"allot.dev/allot/pkg/client/clienttest"
)

// BuildAllot builds ./cmd/allot into dir, once per test package
// (clienttest.Build, with a deadline for a cold build cache).
func BuildAllot(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return clienttest.Build(ctx, dir)
}

// ModuleRoot walks up from the working directory to the directory holding
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}
