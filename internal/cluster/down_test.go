package cluster

import (
	"strings"
	"testing"
)

func TestDownReportString(t *testing.T) {
	if got := (DownReport{}).String(); got != "nothing to clean up" {
		t.Errorf("empty report = %q", got)
	}
	got := DownReport{Stopped: 1, Released: 2, Sockets: 3}.String()
	want := "stopped 1 container, removed 0 unstarted containers, unmounted 2 container filesystems and 0 other mounts, removed 3 stale sockets, deleted 0 container records from runc"
	if got != want {
		t.Errorf("report = %q\nwant     %q", got, want)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/with\040space`: "/with space",
		`/tab\011x`:      "/tab\tx",
		`/back\134slash`: `/back\slash`,
		`/short\04`:      `/short\04`,
		`/notoctal\09x`:  `/notoctal\09x`,
		`/end\`:          `/end\`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
	if strings.Contains(unescapeMountPath(`\040`), `\`) {
		t.Error("escape not decoded")
	}
}
