package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func buildInfo(main string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "allot.dev/allot", Version: main}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

// TestFromBuild: linker flags win, then the module version Go recorded,
// then Base with the commit as build metadata.
func TestFromBuild(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := []string{"vcs", "git", "vcs.revision", rev, "vcs.modified", "true"}
	for _, tc := range []struct {
		name string
		ld   build
		bi   *debug.BuildInfo
		want build
	}{
		{"ldflags", build{allot: "v0.2.0", commit: "abc", treeState: "clean", buildDate: "2026-01-02T03:04:05Z"},
			buildInfo("(devel)", vcs...), build{"v0.2.0", "abc", "clean", "2026-01-02T03:04:05Z"}},
		{"ldflags without v", build{allot: "0.2.0"}, nil, build{allot: "v0.2.0"}},
		{"ldflags version, commit from vcs", build{allot: "v0.2.0-rc.1"}, buildInfo("(devel)", vcs...),
			build{allot: "v0.2.0-rc.1", commit: rev, treeState: "dirty"}},
		{"module version", build{}, buildInfo("v0.3.1"), build{allot: "v0.3.1"}},
		{"pseudo-version", build{}, buildInfo("v0.0.0-20260721120000-0123456789ab+dirty", vcs...),
			build{allot: "v0.0.0-20260721120000-0123456789ab+dirty", commit: rev, treeState: "dirty"}},
		{"devel, dirty tree", build{}, buildInfo("(devel)", vcs...),
			build{allot: Base + "+0123456789ab.dirty", commit: rev, treeState: "dirty"}},
		{"devel, clean tree", build{}, buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "false"),
			build{allot: Base + "+0123456789ab", commit: rev, treeState: "clean"}},
		{"devel, no vcs", build{}, buildInfo("(devel)"), build{allot: Base + "+dev"}},
		{"no vcs, commit and tree state from -X", build{commit: rev, treeState: "dirty"}, buildInfo("(devel)"),
			build{allot: Base + "+0123456789ab.dirty", commit: rev, treeState: "dirty"}},
		{"no vcs, a commit that is no hash", build{commit: "unknown"}, buildInfo("(devel)"),
			build{allot: Base + "+dev", commit: "unknown"}},
		{"empty main version", build{}, buildInfo(""), build{allot: Base + "+dev"}},
		{"no build info", build{}, nil, build{allot: Base + "+dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuild(tc.ld, tc.bi); got != tc.want {
				t.Errorf("fromBuild = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLinkerFlagVariables: resolve reads the variables that
// `-ldflags -X allot.dev/allot/internal/version.NAME=...` sets.
func TestLinkerFlagVariables(t *testing.T) {
	saved := []string{version, gitCommit, gitTreeState, buildDate}
	t.Cleanup(func() { version, gitCommit, gitTreeState, buildDate = saved[0], saved[1], saved[2], saved[3] })
	version, gitCommit, gitTreeState, buildDate = "v9.8.7", "feedface", "clean", "2026-07-21T00:00:00Z"
	want := build{"v9.8.7", "feedface", "clean", "2026-07-21T00:00:00Z"}
	if got := resolve(); got != want {
		t.Errorf("resolve with -X variables = %+v, want %+v", got, want)
	}
}

// allotVersionShapes are the shapes an allot version takes: a release, a
// pre-release, development builds (dirty, clean, no VCS), a Go
// pseudo-version, `git describe` of hack/version-ldflags.sh, and this
// build's.
var allotVersionShapes = []string{"v0.2.0", "v0.2.0-rc.1", Base + "+0123456789ab.dirty", Base + "+0123456789ab", Base + "+dev",
	"v0.0.0-20260721120000-0123456789ab+dirty", "v0.2.0-3-g0123456-dirty", Version()}

// TestGitVersionParses: every shape of allot version gives a GitVersion
// that kubectl's parser reads as the API level, a release (no pre-release
// part) with allot's version in the build metadata, and that
// FromGitVersion reads back.
func TestGitVersionParses(t *testing.T) {
	for _, v := range allotVersionShapes {
		gv := gitVersionOf(v)
		sv, err := utilversion.ParseSemantic(gv)
		if err != nil {
			t.Errorf("%s: %v", gv, err)
			continue
		}
		if got, want := sv.String(), gv[1:]; got != want {
			t.Errorf("%s parses as %s", gv, got)
		}
		if major, minor, patch := sv.Major(), sv.Minor(), sv.Patch(); major != 1 || minor != 37 || patch != 0 {
			t.Errorf("%s: API level %d.%d.%d, want %s.%s.0", gv, major, minor, patch, KubernetesMajor, KubernetesMinor)
		}
		if sv.PreRelease() != "" {
			t.Errorf("%s: pre-release %q, want a release", gv, sv.PreRelease())
		}
		if !strings.HasPrefix(sv.BuildMetadata(), "allot.v") {
			t.Errorf("%s: build metadata %q, want allot.<allot version>", gv, sv.BuildMetadata())
		}
		if back, ok := FromGitVersion(gv); !ok || back != v {
			t.Errorf("FromGitVersion(%s) = %q, %v; want %q", gv, back, ok, v)
		}
	}
	if got, want := gitVersionOf(Base+"+0123456789ab.dirty"), "v1.37.0+allot."+Base+".build.0123456789ab.dirty"; got != want {
		t.Errorf("GitVersion of a dirty development build %q, want %q", got, want)
	}
	for _, gv := range []string{"v1.37.4", "v1.37.0+allot.", "v1.32.0-allot-v0.2.0", "v1.30.2+k3s1", ""} {
		if v, ok := FromGitVersion(gv); ok {
			t.Errorf("FromGitVersion(%q) = %q, want not allot's", gv, v)
		}
	}
}

// TestGitVersionMeetsChartKubeVersion: a Helm chart's kubeVersion
// constraint is met by the API level allot serves, whatever allot's own
// version. Helm parses the server's gitVersion as a semver
// (Masterminds/semver, which is not in allot's module graph; apimachinery's
// parser orders versions by the same semver rules) and a version with a
// pre-release part meets only constraints that carry one themselves ("-0"),
// which is why allot's version travels in the build metadata. The old form
// "v1.32.0-allot-..." met none of these.
func TestGitVersionMeetsChartKubeVersion(t *testing.T) {
	for _, tc := range []struct {
		constraint string
		want       bool
	}{
		{">= 1.33.0-0", true}, // the example driver's chart
		{">= 1.34.0", true},   // resource.k8s.io/v1
		{">=1.37.0-0 <1.38.0-0", true},
		{"< 1.37.0", false},
		{">= 1.38.0-0", false},
	} {
		for _, v := range allotVersionShapes {
			gv := gitVersionOf(v)
			got, err := meetsKubeVersion(gv, tc.constraint)
			if err != nil {
				t.Fatalf("%s: %v", gv, err)
			}
			if got != tc.want {
				t.Errorf("kubeVersion %q with server gitVersion %s: %v, want %v", tc.constraint, gv, got, tc.want)
			}
		}
	}
	// Controls: the old form is below the level; a pre-release form at the
	// right level still fails a constraint without "-0".
	for _, tc := range []struct{ gitVersion, constraint string }{
		{"v1.32.0-allot-v0.2.0", ">= 1.33.0-0"},
		{"v1.37.0-allot-v0.2.0", ">= 1.34.0"},
	} {
		if ok, err := meetsKubeVersion(tc.gitVersion, tc.constraint); err != nil || ok {
			t.Errorf("control: %s meets %q (%v), want not", tc.gitVersion, tc.constraint, err)
		}
	}
}

// meetsKubeVersion evaluates a Helm kubeVersion constraint made of
// space-separated comparisons that must all hold ("op version"), with
// Masterminds/semver's rule that a pre-release version meets a comparison
// only when the comparison's version has a pre-release part too.
func meetsKubeVersion(gitVersion, constraint string) (bool, error) {
	v, err := utilversion.ParseSemantic(gitVersion)
	if err != nil {
		return false, err
	}
	fields := strings.Fields(constraint)
	for i := 0; i < len(fields); i++ {
		op := strings.TrimRight(fields[i], "0123456789.-")
		operand := strings.TrimPrefix(fields[i], op)
		if operand == "" && i+1 < len(fields) {
			i++
			operand = fields[i]
		}
		c, err := utilversion.ParseSemantic(operand)
		if err != nil {
			return false, fmt.Errorf("constraint %q: %w", constraint, err)
		}
		if v.PreRelease() != "" && c.PreRelease() == "" {
			return false, nil
		}
		var ok bool
		switch op {
		case ">=":
			ok = v.AtLeast(c)
		case ">":
			ok = v.GreaterThan(c)
		case "<":
			ok = v.LessThan(c)
		case "<=":
			ok = !v.GreaterThan(c)
		default:
			return false, fmt.Errorf("constraint %q: operator %q", constraint, op)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func TestGet(t *testing.T) {
	info := Get()
	if info.Major != KubernetesMajor || info.Minor != KubernetesMinor {
		t.Errorf("major.minor %s.%s, want the API level %s.%s", info.Major, info.Minor, KubernetesMajor, KubernetesMinor)
	}
	if info.GitVersion != GitVersion() || info.GitVersion != "v1.37.0+allot."+strings.Replace(Version(), "+", ".build.", 1) {
		t.Errorf("gitVersion %q, GitVersion() %q, Version() %q", info.GitVersion, GitVersion(), Version())
	}
	if _, err := utilversion.ParseSemantic(Version()); err != nil {
		t.Errorf("Version() %q is not a semver: %v", Version(), err)
	}
	if info.GoVersion != runtime.Version() || info.Compiler != runtime.Compiler || info.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("build facts %+v", info)
	}
}
