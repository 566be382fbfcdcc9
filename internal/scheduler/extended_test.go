package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
)

// claimMaker is a BindClaimMaker that asks for one claim per binding and
// names it in the Binding.
type claimMaker struct{}

func (claimMaker) Name() string { return "ClaimMaker" }

func (claimMaker) ContributeBinding(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, _ string, b *corev1.Binding) *framework.Status {
	b.ResourceClaims = append(b.ResourceClaims, corev1.BindingResourceClaim{Name: "placeholder"})
	return nil
}

func (claimMaker) ClaimToCreate(*framework.CycleState) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "p-extended-resources-"}}
}

func (claimMaker) ClaimCreated(_ *framework.CycleState, b *corev1.Binding, c *resourcev1.ResourceClaim) error {
	b.ResourceClaims[len(b.ResourceClaims)-1].Name = c.Name
	return nil
}

// claimLog is a claimWriter that records what it did.
type claimLog struct {
	mu      sync.Mutex
	n       int
	created []string
	deleted []string
}

func (l *claimLog) CreateClaim(_ context.Context, c *resourcev1.ResourceClaim) (*resourcev1.ResourceClaim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	out := c.DeepCopy()
	out.Name, out.UID = fmt.Sprintf("%s%d", c.GenerateName, l.n), types.UID(fmt.Sprint("uid-", l.n))
	l.created = append(l.created, out.Name)
	return out, nil
}

func (l *claimLog) DeleteClaim(_ context.Context, _, name string, uid types.UID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deleted = append(l.deleted, name+"/"+string(uid))
	return nil
}

func (l *claimLog) get() (created, deleted []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.created...), append([]string(nil), l.deleted...)
}

// The claim a BindClaimMaker asks for is created before the Binding is
// posted and named in it; when the API server refuses the binding, it is
// deleted (by UID), and the next attempt makes a new one. After a failure
// that may have committed (a lost answer), it is left to its owner.
func TestBindClaimMaker(t *testing.T) {
	log := &claimLog{}
	var mu sync.Mutex
	fails := []error{apierrors.NewConflict(corev1.Resource("pods"), "p", fmt.Errorf("fence")), context.DeadlineExceeded}
	f := start(t, Config{ExtraPlugins: []framework.Plugin{claimMaker{}}}, func(f *fakeCluster) {
		f.s.claims = log
		f.bindHook = func(context.Context, string) error {
			mu.Lock()
			defer mu.Unlock()
			if len(fails) == 0 {
				return nil
			}
			err := fails[0]
			fails = fails[1:]
			return err
		}
	})
	f.s.onNodeAdd(makeNode("n").Alloc("cpu", "2").Obj())
	f.addPod(makePod("p").Obj())
	f.waitNode(t, "p")
	created, deleted := log.get()
	if want := "[p-extended-resources-1 p-extended-resources-2 p-extended-resources-3]"; fmt.Sprint(created) != want {
		t.Errorf("created %v, want %s", created, want)
	}
	if want := "[p-extended-resources-1/uid-1]"; fmt.Sprint(deleted) != want {
		t.Errorf("deleted %v, want %s (the refused binding's claim only)", deleted, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.bindings["p"]; len(b.ResourceClaims) != 1 || b.ResourceClaims[0].Name != "p-extended-resources-3" {
		t.Fatalf("binding = %+v, want the third claim", b)
	}
}
