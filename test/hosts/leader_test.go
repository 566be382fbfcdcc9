package hosts

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/test/chaos"
)

// takeover is one kill -9 of a leader: who led, who took over, and how
// long after the kill the Lease named the standby.
type takeover struct {
	lease, killed, by string
	after             time.Duration
}

func (k takeover) String() string {
	return fmt.Sprintf("%s: %s killed (SIGKILL), %s leads %v later", k.lease, k.killed, k.by, k.after.Round(10*time.Millisecond))
}

// churnPods is how many pods the churn creates, one every churnEvery;
// each holds a gpu.example.com device for churnRun.
const (
	churnPods  = 18
	churnEvery = 150 * time.Millisecond
	churnRun   = time.Second
)

// churnKillingLeaders creates pods with claims on the nodes while it
// kills the leading scheduler, then the leading controller manager, with
// SIGKILL; each is restarted (as systemd would) once a standby leads.
// Every pod must finish, and the chaos suite's invariants hold: at every
// sampled revision no device is held by two claims and running pods hold
// their claims; once the pods are gone no claim is left, and the drivers'
// own records show every claim unprepared and no device prepared for two
// claims at once.
func churnKillingLeaders(t *testing.T, c *cluster) []takeover {
	t.Helper()
	sampler := startSampler(t, c)
	var created atomic.Int32
	names := make([]string, churnPods)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range churnPods {
			names[i] = fmt.Sprintf("churn-%02d", i)
			if _, err := c.admin.Pods(namespace).Create(ctx(t), newPod(names[i], runFor(churnRun))); err != nil {
				t.Errorf("create pod %s: %v", names[i], err)
				return
			}
			created.Add(1)
			time.Sleep(churnEvery)
		}
	})
	var took []takeover
	for _, k := range []struct {
		lease    string
		replicas []*component
		after    int32
	}{{"allot-scheduler", c.schedulers, 4}, {"allot-controller-manager", c.managers, 10}} {
		waitFor(t, 30*time.Second, fmt.Sprintf("%d pods created", k.after), func() bool { return created.Load() >= k.after })
		took = append(took, c.killLeader(t, k.lease, k.replicas))
	}
	wg.Wait()
	if t.Failed() {
		return took
	}
	for _, name := range names {
		waitFor(t, 90*time.Second, "pod "+name+" Succeeded", func() bool {
			p := c.pod(t, name)
			return p != nil && p.Status.Phase == corev1.PodSucceeded
		})
	}
	c.deletePods(t, names...)
	var claims chaos.Claims
	waitFor(t, 60*time.Second, "the churn's claims gone", func() bool {
		_, claims = c.snapshot(t)
		return claims.Len() == 0
	})
	vs := sampler.stop()
	vs = append(vs, chaos.CheckSettledClaims(nil, claims)...)
	for _, n := range c.nodes {
		vs = append(vs, n.checkDriver(t)...)
		for _, name := range names {
			if got := n.containers(t, name); len(got) > 0 {
				t.Errorf("containers of %s left on %s: %v", name, n.name, got)
			}
		}
	}
	for _, v := range vs {
		t.Errorf("violation: %s", v)
	}
	t.Logf("%d snapshots checked during the churn", sampler.samples)
	for _, comp := range append(append([]*component{}, c.schedulers...), c.managers...) {
		if n := comp.restarts(); n > 0 {
			t.Logf("%s exited on its own %d time(s) (a lease it could not renew in time) and was started again", comp.name, n)
		}
	}
	return took
}

// killLeader kills the replica holding the Lease with SIGKILL (the
// process only), holds it down until another replica holds the Lease,
// and starts it again.
func (c *cluster) killLeader(t *testing.T, lease string, replicas []*component) takeover {
	t.Helper()
	leader := c.waitLeader(t, lease, "")
	i := slices.IndexFunc(replicas, func(r *component) bool { return r.name == leader })
	if i < 0 {
		t.Fatalf("lease %s held by %q, none of the replicas", lease, leader)
	}
	comp := replicas[i]
	comp.mu.Lock()
	comp.down = true
	p := comp.p
	comp.mu.Unlock()
	killed := time.Now()
	p.Kill()
	by := c.waitLeader(t, lease, leader)
	k := takeover{lease: lease, killed: leader, by: by, after: time.Since(killed)}
	c.restart(t, comp) // as systemd would; it clears down
	t.Log(k)
	return k
}

// sampler checks consistent snapshots of pods and claims every 100ms
// with the chaos suite's invariants.
type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	samples int
	vs      []chaos.Violation
}

func startSampler(t *testing.T, c *cluster) *sampler {
	sctx, cancel := context.WithCancel(t.Context())
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-sctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			pods, claims, err := c.trySnapshot(sctx)
			if err != nil {
				continue // the test's context ended, or a transient error
			}
			s.samples++
			for _, v := range append(chaos.CheckNoDoubleAllocation(claims), chaos.CheckRunningPodsReserved(pods, claims)...) {
				if !slices.Contains(s.vs, v) {
					s.vs = append(s.vs, v)
				}
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// stop ends the sampling and returns the violations seen.
func (s *sampler) stop() []chaos.Violation {
	s.cancel()
	<-s.done
	return s.vs
}
