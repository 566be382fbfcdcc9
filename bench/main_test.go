package bench

import (
	"os"
	"testing"

	"allot.dev/allot/internal/gctune"
)

// TestMain runs the components with the garbage collector target the
// allot binary gives them (GOGC, when set, wins as it does there).
func TestMain(m *testing.M) {
	gctune.Apply(gctune.DefaultPercent, false)
	os.Exit(m.Run())
}
