package e2e

import "allot.dev/allot/test/internal/testproc"

// The suite's names for the shared process helpers.
type (
	proc         = testproc.Proc
	lockedBuffer = testproc.LockedBuffer
)

var (
	startProc = testproc.Start
	tail      = testproc.Tail
	childEnv  = testproc.ChildEnv
)
