package framework_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	fw "allot.dev/allot/internal/scheduler/framework"
)

func TestStatus(t *testing.T) {
	var nilStatus *fw.Status
	if !nilStatus.IsSuccess() || nilStatus.Code() != fw.Success || nilStatus.Message() != "" || nilStatus.String() != "Success" {
		t.Fatal("a nil status must read as Success")
	}
	st := fw.NewStatus(fw.Unschedulable, "Insufficient cpu", "Insufficient memory").WithDetail("cpu: %d", 2).WithPlugin("Fit")
	if st.Message() != "Insufficient cpu, Insufficient memory: cpu: 2" || st.Plugin() != "Fit" || !st.IsRejected() {
		t.Fatalf("status = %v", st)
	}
	if st.Err() != nil {
		t.Fatal("a rejection has no error")
	}
	boom := errors.New("boom")
	es := fw.AsStatus(boom)
	if es.Code() != fw.Error || !errors.Is(es.Err(), boom) || es.IsRejected() {
		t.Fatalf("AsStatus = %v", es)
	}
	if fw.AsStatus(nil) != nil {
		t.Fatal("AsStatus(nil) must be nil")
	}
	if fw.NewStatus(fw.Wait).IsRejected() {
		t.Fatal("Wait is not a rejection")
	}
}

func TestCycleStateClone(t *testing.T) {
	cs := fw.NewCycleState()
	cs.Write("k", &counter{n: 1})
	cp := cs.Clone()
	c, err := fw.ReadAs[*counter](cp, "k")
	if err != nil {
		t.Fatal(err)
	}
	c.n = 2
	orig, _ := fw.ReadAs[*counter](cs, "k")
	if orig.n != 1 {
		t.Fatal("Clone shares data with the original")
	}
	if _, err := cs.Read("missing"); !errors.Is(err, fw.ErrNotFound) {
		t.Fatalf("Read(missing) = %v, want ErrNotFound", err)
	}
	if _, err := fw.ReadAs[*other](cs, "k"); err == nil {
		t.Fatal("ReadAs with the wrong type succeeded")
	}
	cs.Write("j", &counter{n: 3})
	cs.Write("k", &counter{n: 4})
	if c, _ := fw.ReadAs[*counter](cs, "k"); c.n != 4 {
		t.Fatalf("k after a second write: %d, want 4", c.n)
	}
	if c, _ := fw.ReadAs[*counter](cp, "k"); c.n != 2 {
		t.Fatalf("the clone's k after the original's write: %d, want 2", c.n)
	}
	cs.Delete("k")
	if _, err := cs.Read("k"); err == nil {
		t.Fatal("Delete left the key")
	}
	if c, err := fw.ReadAs[*counter](cs, "j"); err != nil || c.n != 3 {
		t.Fatalf("j after deleting k: %v %v", c, err)
	}
}

// Filters read the state concurrently while a plugin may write to it.
func TestCycleStateConcurrentReads(t *testing.T) {
	cs := fw.NewCycleState()
	cs.Write("a", &counter{n: 1})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if _, err := cs.Read("a"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 100 {
		cs.Write(fw.StateKey(fmt.Sprint("k", i)), &counter{n: i})
	}
	wg.Wait()
	for i := range 100 {
		if c, err := fw.ReadAs[*counter](cs, fw.StateKey(fmt.Sprint("k", i))); err != nil || c.n != i {
			t.Fatalf("k%d: %v %v", i, c, err)
		}
	}
}

type counter struct{ n int }

func (c *counter) Clone() fw.StateData { cp := *c; return &cp }

type other struct{}

func (o *other) Clone() fw.StateData { return o }

func TestEventMatch(t *testing.T) {
	nodeAny := fw.ClusterEvent{Resource: fw.Node, ActionType: fw.All}
	if !nodeAny.Match(fw.ClusterEvent{Resource: fw.Node, ActionType: fw.Update}) {
		t.Error("Node/All should match Node/Update")
	}
	if nodeAny.Match(fw.ClusterEvent{Resource: fw.AssignedPod, ActionType: fw.Delete}) {
		t.Error("Node/All should not match AssignedPod/Delete")
	}
	wild := fw.ClusterEvent{Resource: fw.WildCard, ActionType: fw.Delete}
	if !wild.Match(fw.ClusterEvent{Resource: fw.ResourceClaim, ActionType: fw.Delete}) || wild.Match(fw.ClusterEvent{Resource: fw.Node, ActionType: fw.Add}) {
		t.Error("wildcard matching is wrong")
	}
	if got := (fw.Add | fw.Delete).String(); got != "Add|Delete" {
		t.Errorf("String = %q", got)
	}
}
