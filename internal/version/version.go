// Package version is allot's version: one string, fixed by the build, that
// `allot version`, the API server's /version and every node's status
// report.
//
// A release sets it at link time:
//
//	go build -ldflags "-X allot.dev/allot/internal/version.version=v0.2.0 \
//	  -X allot.dev/allot/internal/version.gitCommit=$(git rev-parse HEAD) \
//	  -X allot.dev/allot/internal/version.gitTreeState=clean \
//	  -X allot.dev/allot/internal/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
//	  -o bin/allot ./cmd/allot
//
// Without -X the version comes from the binary's build information: the
// main module's version when Go recorded one (`go install
// allot.dev/allot/cmd/allot@v0.2.0`, or a VCS-stamped build), else Base
// plus the commit as semver build metadata ("v0.1.0+0123456789ab", with
// ".dirty" when the tree had changes, "v0.1.0+dev" when Go recorded no
// commit). Each of commit, tree state and build date that -X leaves unset
// also comes from the build information when it has them.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	apiversion "k8s.io/apimachinery/pkg/version"
)

// The Kubernetes API level allot serves: the major and minor of /version,
// and the major.minor that starts GitVersion. kubectl's version-skew check
// (`kubectl version`) parses the server's gitVersion and compares its
// major.minor with its own; other clients read the major and minor
// fields. Both must therefore be the API level, never allot's own
// version: raise them together when allot serves a newer API.
const (
	KubernetesMajor = "1"
	KubernetesMinor = "37"
)

// Base is the version of a build that neither -X nor the module system
// named: the last release this tree is at or after.
const Base = "v0.1.0"

// gitVersionPrefix starts every GitVersion: the API level as a release
// semver, then build metadata that carries allot's version, as Kubernetes
// distributions mark theirs ("v1.30.2+k3s1"). Build metadata, unlike a
// pre-release part, leaves the version a release: semver constraints such
// as a Helm chart's `kubeVersion: ">= 1.33.0"` compare the API level alone.
const gitVersionPrefix = "v" + KubernetesMajor + "." + KubernetesMinor + ".0+allot."

// buildMark stands in a GitVersion for the "+" of allot's own build
// metadata, which semver allows only once: "v0.1.0+0123456789ab.dirty"
// is carried as "v0.1.0.build.0123456789ab.dirty".
const buildMark = ".build."

// Set with -ldflags -X by release builds; see the package comment.
var (
	version      string
	gitCommit    string
	gitTreeState string
	buildDate    string
)

// shortRevision is how much of the commit hash build metadata keeps, as Go
// pseudo-versions do.
const shortRevision = 12

var resolved = sync.OnceValue(resolve)

// Version is allot's version, a semver with a leading "v": "v0.2.0",
// "v0.1.0+0123456789ab.dirty".
func Version() string { return resolved().allot }

// GitVersion is what allot reports where Kubernetes reports its own
// version: /version's gitVersion and a node's kubeletVersion. It is the API
// level with allot's version as build metadata, "v1.37.0+allot.v0.2.0"
// ("v1.37.0+allot.v0.1.0.build.0123456789ab.dirty" for a development
// build): a valid release semver whose major.minor kubectl's skew check
// and Helm's kubeVersion check read as the API level, and from which
// FromGitVersion reads allot's version back.
func GitVersion() string { return gitVersionOf(Version()) }

func gitVersionOf(allot string) string {
	return gitVersionPrefix + strings.Replace(allot, "+", buildMark, 1)
}

// FromGitVersion returns the allot version inside a GitVersion, and false
// for a gitVersion that is not allot's (a Kubernetes API server's). The
// first buildMark is read as allot's "+": an allot version whose
// pre-release part has an identifier "build" after a dot reads back
// differently (allot's tags have none).
func FromGitVersion(gitVersion string) (string, bool) {
	v, ok := strings.CutPrefix(gitVersion, gitVersionPrefix)
	if !ok || v == "" {
		return "", false
	}
	return strings.Replace(v, buildMark, "+", 1), true
}

// Get returns the version in the shape of Kubernetes' /version.
func Get() apiversion.Info {
	r := resolved()
	return apiversion.Info{
		Major: KubernetesMajor, Minor: KubernetesMinor,
		GitVersion: gitVersionOf(r.allot), GitCommit: r.commit, GitTreeState: r.treeState,
		BuildDate: r.buildDate, GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// build is what the version is made of.
type build struct {
	allot, commit, treeState, buildDate string
}

func resolve() build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return fromBuild(build{allot: version, commit: gitCommit, treeState: gitTreeState, buildDate: buildDate}, bi)
}

// fromBuild fills what the linker flags (ld) left empty from the build
// information (nil when the binary has none).
func fromBuild(ld build, bi *debug.BuildInfo) build {
	out := ld
	var revision, modified string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if out.commit == "" {
		out.commit = revision
	}
	if out.treeState == "" {
		switch modified {
		case "true":
			out.treeState = "dirty"
		case "false":
			out.treeState = "clean"
		}
	}
	switch {
	case out.allot != "":
		if out.allot[0] >= '0' && out.allot[0] <= '9' {
			out.allot = "v" + out.allot // -X version=0.2.0
		}
	case bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		out.allot = bi.Main.Version
	default:
		// The commit and tree state resolved above: -X's, else Go's VCS
		// stamp (absent with -buildvcs=false).
		meta := "dev"
		if out.commit != "" && isHex(out.commit) {
			meta = out.commit[:min(len(out.commit), shortRevision)]
			if out.treeState == "dirty" {
				meta += ".dirty"
			}
		}
		out.allot = Base + "+" + meta
	}
	return out
}

// isHex reports whether s is a hexadecimal commit hash (so it is valid
// semver build metadata).
func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return s != ""
}
