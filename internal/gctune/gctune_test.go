package gctune

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	inEffect := func() int { v := debug.SetGCPercent(-1); debug.SetGCPercent(v); return v }

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime read it at start
	if got := Apply(DefaultPercent, false); got != 150 || inEffect() != 150 {
		t.Fatalf("GOGC=150 set, default not explicit: Apply says %d, %d in effect; want 150", got, inEffect())
	}
	if got := Apply(300, true); got != 300 || inEffect() != 300 {
		t.Fatalf("explicit 300 with GOGC set: Apply says %d, %d in effect; want 300", got, inEffect())
	}
	if err := os.Unsetenv("GOGC"); err != nil { // t.Setenv restores it afterwards
		t.Fatal(err)
	}
	if got := Apply(DefaultPercent, false); got != DefaultPercent || inEffect() != DefaultPercent {
		t.Fatalf("no GOGC: Apply says %d, %d in effect; want %d", got, inEffect(), DefaultPercent)
	}
}
