package main

import (
	"os"
	"path/filepath"
)

func defaultDataDir() string {
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".allot")
	}
	return ".allot"
}
