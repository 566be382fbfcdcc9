package leaderelect

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// The metrics are Kubernetes' (component-base's leader election metrics):
// leader_election_master_status is 1 while this replica leads the named
// lease, 0 otherwise; leader_election_slowpath_total counts renewals that
// needed a full read of the Lease.
var (
	masterStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "1 while this replica is the leader of the named lease, 0 otherwise.",
	}, []string{"name"})
	slowpath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leader_election_slowpath_total",
		Help: "Lease renewals that went through the slow path (a fresh read of the Lease).",
	}, []string{"name"})
	setProvider sync.Once
)

// registerMetrics registers the metrics in reg (once per registry) and
// makes client-go's leader election report to them (once per process).
func registerMetrics(reg prometheus.Registerer) {
	setProvider.Do(func() { leaderelection.SetProvider(metricsProvider{}) })
	for _, c := range []prometheus.Collector{masterStatus, slowpath} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				panic(err) // a metric of the same name and another shape: a programming error
			}
		}
	}
}

type metricsProvider struct{}

func (metricsProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(name string)                { masterStatus.WithLabelValues(name).Set(1) }
func (leaderMetric) Off(name string)               { masterStatus.WithLabelValues(name).Set(0) }
func (leaderMetric) SlowpathExercised(name string) { slowpath.WithLabelValues(name).Inc() }
