package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// The events of the demo pod as `allot up --demo` wrote them, in the
// order the API lists them (by name: object name and the recorder's
// clock in nanoseconds). The node recorded that the bound pod waited for
// its claim 0.7 ms before the scheduler, its binding returned, recorded
// Scheduled; both carry the same second. describe listed
// WaitingForResourceClaim first.
func TestSortEventsInTheOrderTheyHappened(t *testing.T) {
	at := func(s string) metav1.Time {
		ts, err := time.Parse(time.RFC3339, "2026-11-26T15:52:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return metav1.NewTime(ts)
	}
	ev := func(name, reason, from, podRV, first, last string, count int32) corev1.Event {
		return corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "demo." + name, Namespace: "demo"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "demo", ResourceVersion: podRV},
			Reason:         reason, Source: corev1.EventSource{Component: from},
			FirstTimestamp: at(first), LastTimestamp: at(last), Count: count,
		}
	}
	events := []corev1.Event{
		ev("18eba33de865d8cf", "FailedScheduling", "default-scheduler", "14", "42", "42", 4),
		ev("18eba33e62f854d2", "FailedScheduling", "default-scheduler", "19", "44", "44", 2),
		ev("18eba33e638480e4", "WaitingForResourceClaim", "allot-node", "36", "44", "44", 1),
		ev("18eba33e638f0b31", "Scheduled", "default-scheduler", "31", "44", "44", 1),
		ev("18eba33e6d2797b2", "Started", "allot-node", "38", "44", "44", 1),
		ev("18eba33e72298262", "Started", "allot-node", "38", "45", "45", 1),
	}
	// An event of the events.k8s.io kind: eventTime, in microseconds,
	// instead of first and last timestamps. It happened before the second
	// Started (same second, an older pod).
	micro := corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "demo.18eba33e70000000", Namespace: "demo"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "demo", ResourceVersion: "37"},
		Reason:         "Pulled", EventTime: metav1.NewMicroTime(at("45").Add(600 * time.Millisecond)),
	}
	events = append(events, micro)

	sortEvents(events)
	var got []string
	for _, e := range events {
		got = append(got, e.Reason)
	}
	want := "FailedScheduling FailedScheduling Scheduled WaitingForResourceClaim Started Pulled Started"
	if strings.Join(got, " ") != want {
		t.Errorf("events in order %v, want %s", got, want)
	}

	var b strings.Builder
	w := newDescribeWriter(&b)
	describeEvents(w, events)
	w.flush()
	if out := b.String(); strings.Index(out, "Scheduled") > strings.Index(out, "WaitingForResourceClaim") {
		t.Errorf("describe lists WaitingForResourceClaim before Scheduled:\n%s", out)
	}
}
