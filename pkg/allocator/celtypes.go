package allocator

import (
	"github.com/blang/semver/v4"

	"allot.dev/allot/pkg/allocator/celenv"
)

// The seed environment's CEL types for quantities and versions (see
// package celenv, which holds the values of both environments).
var (
	// QuantityType is the CEL type of values in the quantities map and of
	// quantity("...").
	QuantityType = celenv.QuantityType
	// SemverType is the CEL type of values in the versions map and of
	// semver("...").
	SemverType = celenv.SemverType
)

// ParseVersion parses a semantic version tolerantly, as attribute values and
// selector literals are parsed: surrounding spaces and a "v" prefix are
// dropped, missing minor and patch numbers are 0 and leading zeros are
// removed ("v12" is 12.0.0, "1.02.3" is 1.2.3).
func ParseVersion(s string) (semver.Version, error) { return celenv.ParseVersion(s) }
