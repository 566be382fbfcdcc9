package pidlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(path) // a second open, as a second process would
	var held *HeldError
	if !errors.As(err, &held) || held.PID != strconv.Itoa(os.Getpid()) || held.Holder() != "pid "+strconv.Itoa(os.Getpid()) {
		t.Fatalf("second Lock = %v, want a HeldError naming this process", err)
	}
	release()
	release() // idempotent
	again, err := Lock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}
