package version

import (
	"runtime"
	"runtime/debug"
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

// TestGitVersionParses: every shape of allot version gives a GitVersion
// that kubectl's parser reads as the API level, and that FromGitVersion
// reads back.
func TestGitVersionParses(t *testing.T) {
	for _, v := range []string{"v0.2.0", "v0.2.0-rc.1", Base + "+0123456789ab.dirty", Base + "+dev",
		"v0.0.0-20260721120000-0123456789ab+dirty", Version()} {
		gv := gitVersionPrefix + v
		sv, err := utilversion.ParseSemantic(gv)
		if err != nil {
			t.Errorf("%s: %v", gv, err)
			continue
		}
		if got, want := sv.String(), gv[1:]; got != want {
			t.Errorf("%s parses as %s", gv, got)
		}
		if major, minor := sv.Major(), sv.Minor(); major != 1 || minor != 32 {
			t.Errorf("%s: API level %d.%d, want %s.%s", gv, major, minor, KubernetesMajor, KubernetesMinor)
		}
		if back, ok := FromGitVersion(gv); !ok || back != v {
			t.Errorf("FromGitVersion(%s) = %q, %v; want %q", gv, back, ok, v)
		}
	}
	for _, gv := range []string{"v1.32.4", "v1.32.0-allot-", ""} {
		if v, ok := FromGitVersion(gv); ok {
			t.Errorf("FromGitVersion(%q) = %q, want not allot's", gv, v)
		}
	}
}

func TestGet(t *testing.T) {
	info := Get()
	if info.Major != KubernetesMajor || info.Minor != KubernetesMinor {
		t.Errorf("major.minor %s.%s, want the API level %s.%s", info.Major, info.Minor, KubernetesMajor, KubernetesMinor)
	}
	if info.GitVersion != GitVersion() || info.GitVersion != "v1.32.0-allot-"+Version() {
		t.Errorf("gitVersion %q, GitVersion() %q, Version() %q", info.GitVersion, GitVersion(), Version())
	}
	if _, err := utilversion.ParseSemantic(Version()); err != nil {
		t.Errorf("Version() %q is not a semver: %v", Version(), err)
	}
	if info.GoVersion != runtime.Version() || info.Compiler != runtime.Compiler || info.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("build facts %+v", info)
	}
}
