package validation

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

func TestValidatePod(t *testing.T) {
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"minimal":               {pod: makePod("a").obj()},
		"no containers":         {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.Containers = nil }).obj(), want: []string{"spec.containers: at least one container"}},
		"container name label":  {pod: makePod("a").container("Web.1", "img").obj(), want: []string{"spec.containers[1].name"}},
		"container name empty":  {pod: makePod("a").container("", "img").obj(), want: []string{"spec.containers[1].name: Required"}},
		"duplicate container":   {pod: makePod("a").container("app", "img").obj(), want: []string{"spec.containers[1].name: Duplicate"}},
		"duplicate across init": {pod: makePod("a").initContainer("app", "img").obj(), want: []string{"spec.containers[0].name: Duplicate"}},
		"init container ok":     {pod: makePod("a").initContainer("setup", "img").obj()},
		"image required":        {pod: makePod("a").container("side", "").obj(), want: []string{"spec.containers[1].image: Required"}},
		"init image required":   {pod: makePod("a").initContainer("setup", "").obj(), want: []string{"spec.initContainers[0].image"}},
		"env name ok":           {pod: makePod("a").with(env(corev1.EnvVar{Name: "MY_VAR.x", Value: "1"})).obj()},
		"env name invalid":      {pod: makePod("a").with(env(corev1.EnvVar{Name: "1=x"})).obj(), want: []string{"spec.containers[0].env[0].name"}},
		"env name empty":        {pod: makePod("a").with(env(corev1.EnvVar{Value: "x"})).obj(), want: []string{"spec.containers[0].env[0].name: Required"}},
		"env fieldRef":          {pod: makePod("a").with(env(corev1.EnvVar{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})).obj()},
		"env value and from":    {pod: makePod("a").with(env(corev1.EnvVar{Name: "N", Value: "x", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})).obj(), want: []string{"spec.containers[0].env[0].valueFrom"}},
		"env empty source":      {pod: makePod("a").with(env(corev1.EnvVar{Name: "N", ValueFrom: &corev1.EnvVarSource{}})).obj(), want: []string{"spec.containers[0].env[0].valueFrom.fieldRef"}},
		"restartPolicy ok":      {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }).obj()},
		"restartPolicy bad":     {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }).obj(), want: []string{`spec.restartPolicy: supported values: "Always", "OnFailure", "Never"`}},
		"grace period zero":     {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(0)) }).obj()},
		"grace period negative": {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(-1)) }).obj(), want: []string{"spec.terminationGracePeriodSeconds"}},
		"active deadline zero":  {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) }).obj(), want: []string{"spec.activeDeadlineSeconds"}},
		"dnsPolicy bad":         {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" }).obj(), want: []string{"spec.dnsPolicy"}},
		"nodeSelector bad":      {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a b"} }).obj(), want: []string{"spec.nodeSelector[zone]"}},
		"nodeName bad":          {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.NodeName = "Worker_1" }).obj(), want: []string{"spec.nodeName"}},
		"pull policy bad":       {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }).obj(), want: []string{"spec.containers[0].imagePullPolicy"}},
		"port out of range":     {pod: makePod("a").with(func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}} }).obj(), want: []string{"spec.containers[0].ports[0].containerPort"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidatePod(tc.pod), tc.want...) })
	}
}

func env(e corev1.EnvVar) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, e) }
}

func TestValidatePodResources(t *testing.T) {
	const gpu = "example.com/gpu"
	const dc = "deviceclass.resource.kubernetes.io/gpu.example.com"
	const noClass = "spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/]"
	for name, tc := range map[string]struct {
		limits, requests corev1.ResourceList
		want             []string
	}{
		"cpu and memory":          {limits: rl("cpu=2", "memory=1Gi"), requests: rl("cpu=500m", "memory=1Gi")},
		"negative request":        {requests: rl("cpu=-1"), want: []string{"spec.containers[0].resources.requests[cpu]: must be greater than or equal to 0"}},
		"negative limit":          {limits: rl("memory=-1Gi"), want: []string{"spec.containers[0].resources.limits[memory]"}},
		"request above limit":     {limits: rl("cpu=1"), requests: rl("cpu=2"), want: []string{"spec.containers[0].resources.requests[cpu]: less than or equal to cpu limit"}},
		"unknown native resource": {limits: rl("gpus=1"), want: []string{"spec.containers[0].resources.limits[gpus]"}},
		"kubernetes.io reserved":  {limits: rl("kubernetes.io/gpu=1"), want: []string{"spec.containers[0].resources.limits[kubernetes.io/gpu]"}},
		"hugepages":               {limits: rl("hugepages-2Mi=4Mi")},
		"extended equal":          {limits: rl(gpu + "=2"), requests: rl(gpu + "=2")},
		"extended limit only":     {limits: rl(gpu + "=2")},
		"extended request only":   {requests: rl(gpu + "=2"), want: []string{"spec.containers[0].resources.limits[example.com/gpu]: a limit must be set"}},
		"extended not equal":      {limits: rl(gpu + "=2"), requests: rl(gpu + "=1"), want: []string{"spec.containers[0].resources.requests[example.com/gpu]: must be equal to example.com/gpu limit of 2"}},
		"extended fractional":     {limits: rl(gpu + "=500m"), requests: rl(gpu + "=500m"), want: []string{"spec.containers[0].resources.limits[example.com/gpu]: whole number", "spec.containers[0].resources.requests[example.com/gpu]: whole number"}},
		"extended bad name":       {limits: rl("example.com/gpu/x=1"), want: []string{"spec.containers[0].resources.limits[example.com/gpu/x]"}},
		"device class":            {limits: rl(dc + "=1"), requests: rl(dc + "=1")},
		"device class limit only": {limits: rl(dc + "=2")},
		"device class not equal":  {limits: rl(dc + "=2"), requests: rl(dc + "=1"), want: []string{"spec.containers[0].resources.requests[" + dc + "]: must be equal to " + dc + " limit of 2"}},
		"device class fractional": {limits: rl(dc + "=1500m"), requests: rl(dc + "=1500m"), want: []string{"spec.containers[0].resources.limits[" + dc + "]: whole number", "spec.containers[0].resources.requests[" + dc + "]: whole number"}},
		"device class no class":   {limits: rl("deviceclass.resource.kubernetes.io/=1"), want: []string{noClass + ": name part must be non-empty", noClass + ": name part must consist"}},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, ValidatePod(makePod("a").resources(tc.limits, tc.requests).obj()), tc.want...)
		})
	}
}

func TestValidatePodClaims(t *testing.T) {
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"claim":            {pod: makePod("a").claim("gpu").obj()},
		"template claim":   {pod: makePod("a").templateClaim("gpu", "gpu-template").obj()},
		"two claims":       {pod: makePod("a").claim("gpu").claim("nic").obj()},
		"duplicate claim":  {pod: makePod("a").claim("gpu").claim("gpu").obj(), want: []string{"spec.resourceClaims[1].name: Duplicate", "spec.containers[0].resources.claims[1].name: Duplicate"}},
		"claim name label": {pod: makePod("a").templateClaim("gpu.x", "t").obj(), want: []string{"spec.resourceClaims[0].name"}},
		"neither source": {
			pod:  makePod("a").with(func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} }).obj(),
			want: []string{"spec.resourceClaims[0]: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"},
		},
		"both sources": {
			pod:  makePod("a").claim("gpu").with(func(p *corev1.Pod) { p.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr("t") }).obj(),
			want: []string{"spec.resourceClaims[0]: may specify only one of: `resourceClaimName`, `resourceClaimTemplateName`"},
		},
		"bad claim name": {
			pod:  makePod("a").claim("gpu").with(func(p *corev1.Pod) { p.Spec.ResourceClaims[0].ResourceClaimName = ptr("Bad_Name") }).obj(),
			want: []string{"spec.resourceClaims[0].resourceClaimName"},
		},
		"container uses unknown claim": {
			pod:  makePod("a").with(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}} }).obj(),
			want: []string{"spec.containers[0].resources.claims[0].name: must be the name of an entry in spec.resourceClaims"},
		},
		"container claim without name": {
			pod:  makePod("a").with(func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{}} }).obj(),
			want: []string{"spec.containers[0].resources.claims[0].name: Required"},
		},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidatePod(tc.pod), tc.want...) })
	}
}

func TestValidatePodScheduling(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}},
			}}}
		}
	}
	tol := func(t corev1.Toleration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
	}
	const expr = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
	for name, tc := range map[string]struct {
		mutate func(*corev1.Pod)
		want   []string
	}{
		"In with values":     {mutate: req("zone", corev1.NodeSelectorOpIn, "a")},
		"In without values":  {mutate: req("zone", corev1.NodeSelectorOpIn), want: []string{expr + ".values: Required"}},
		"Exists with values": {mutate: req("zone", corev1.NodeSelectorOpExists, "a"), want: []string{expr + ".values: Forbidden"}},
		"Gt integer":         {mutate: req("cores", corev1.NodeSelectorOpGt, "4")},
		"Gt not integer":     {mutate: req("cores", corev1.NodeSelectorOpGt, "four"), want: []string{expr + ".values[0]: must be an integer"}},
		"Lt two values":      {mutate: req("cores", corev1.NodeSelectorOpLt, "1", "2"), want: []string{expr + ".values: single value"}},
		"unknown operator":   {mutate: req("zone", "Near", "a"), want: []string{expr + ".operator"}},
		"bad key":            {mutate: req("a b", corev1.NodeSelectorOpExists), want: []string{expr + ".key"}},
		"no terms": {mutate: func(p *corev1.Pod) {
			req("zone", corev1.NodeSelectorOpExists)(p)
			p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = nil
		}, want: []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required"}},
		"toleration exists":      {mutate: tol(corev1.Toleration{Operator: corev1.TolerationOpExists})},
		"toleration equal":       {mutate: tol(corev1.Toleration{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})},
		"toleration no key":      {mutate: tol(corev1.Toleration{Operator: corev1.TolerationOpEqual}), want: []string{"spec.tolerations[0].operator: must be 'Exists'"}},
		"toleration bad op":      {mutate: tol(corev1.Toleration{Key: "gpu", Operator: "Like"}), want: []string{"spec.tolerations[0].operator"}},
		"toleration exists val":  {mutate: tol(corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Value: "x"}), want: []string{"spec.tolerations[0].value"}},
		"toleration bad effect":  {mutate: tol(corev1.Toleration{Key: "gpu", Effect: "Evict"}), want: []string{"spec.tolerations[0].effect"}},
		"tolerationSeconds only": {mutate: tol(corev1.Toleration{Key: "gpu", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr(int64(5))}), want: []string{"spec.tolerations[0].effect: must be 'NoExecute'"}},
		"preferred weight": {
			mutate: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}}}}
			},
			want: []string{"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
		},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidatePod(makePod("a").with(tc.mutate).obj()), tc.want...) })
	}
}

func TestValidatePodUpdate(t *testing.T) {
	for name, tc := range map[string]struct {
		old, change func(*corev1.Pod)
		want        []string
	}{
		"unchanged":             {},
		"labels change":         {change: func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }},
		"image change":          {change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "other" }, want: []string{"spec: may not change fields other than"}},
		"nodeName set":          {change: func(p *corev1.Pod) { p.Spec.NodeName = "worker-1" }, want: []string{"spec: the node is set through a Binding"}},
		"toleration added":      {change: func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }},
		"toleration removed":    {old: func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }, change: func(p *corev1.Pod) { p.Spec.Tolerations = nil }, want: []string{"spec.tolerations: only new ones added"}},
		"deadline set":          {change: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }},
		"deadline lowered":      {old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }, change: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(30)) }},
		"deadline raised":       {old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }, change: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(90)) }, want: []string{"spec.activeDeadlineSeconds"}},
		"deadline removed":      {old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(60)) }, change: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, want: []string{"spec.activeDeadlineSeconds"}},
		"new spec re-validated": {change: func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Key: "a b"}} }, want: []string{"spec.tolerations[0].key"}},
	} {
		t.Run(name, func(t *testing.T) {
			old := makePod("a").claim("gpu").obj()
			if tc.old != nil {
				tc.old(old)
			}
			n := old.DeepCopy()
			if tc.change != nil {
				tc.change(n)
			}
			expectErrs(t, ValidatePodUpdate(n, old), tc.want...)
		})
	}
}

func TestValidatePodStatusUpdate(t *testing.T) {
	for name, tc := range map[string]struct {
		old, change func(*corev1.Pod)
		want        []string
	}{
		"running":             {change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
		"bad phase":           {change: func(p *corev1.Pod) { p.Status.Phase = "Sleeping" }, want: []string{"status.phase"}},
		"leaves terminal":     {old: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, want: []string{"status.phase: has terminated"}},
		"custom condition":    {change: cond("ResourceClaimsUnprepared", corev1.ConditionTrue)},
		"condition no type":   {change: cond("", corev1.ConditionTrue), want: []string{"status.conditions[0].type: Required"}},
		"condition no status": {change: cond("Ready", ""), want: []string{"status.conditions[0].status: Required"}},
		"condition bad":       {change: cond("Ready", "Yes"), want: []string{"status.conditions[0].status: Unsupported"}},
		"template claim status": {
			change: claimStatus("gen", ptr("a-gen-x1")),
		},
		"claim status nil name": {change: claimStatus("gen", nil)},
		"claim status unknown":  {change: claimStatus("nope", nil), want: []string{"status.resourceClaimStatuses[0].name: must be the name of an entry"}},
		"claim status for a direct claim": {
			change: claimStatus("gpu", ptr("gpu")),
			want:   []string{"status.resourceClaimStatuses[0].name: uses resourceClaimTemplateName"},
		},
		"claim status duplicate": {
			change: func(p *corev1.Pod) { claimStatus("gen", nil)(p); claimStatus("gen", nil)(p) },
			want:   []string{"status.resourceClaimStatuses[1].name: Duplicate"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			old := makePod("a").claim("gpu").templateClaim("gen", "tmpl").obj()
			if tc.old != nil {
				tc.old(old)
			}
			n := old.DeepCopy()
			tc.change(n)
			expectErrs(t, ValidatePodStatusUpdate(n, old), tc.want...)
		})
	}
}

func cond(typ corev1.PodConditionType, status corev1.ConditionStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: status})
	}
}

func claimStatus(name string, claim *string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: name, ResourceClaimName: claim})
	}
}

func TestDefaultPod(t *testing.T) {
	pod := makePod("a").initContainer("setup", "img").resources(rl("cpu=1", "example.com/gpu=1"), rl("cpu=500m")).obj()
	DefaultPod(pod)
	again := pod.DeepCopy()
	DefaultPod(again)
	s := pod.Spec
	c := s.Containers[0]
	got := []any{s.RestartPolicy, *s.TerminationGracePeriodSeconds, s.SchedulerName, s.DNSPolicy, pod.Status.Phase,
		c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy, s.InitContainers[0].ImagePullPolicy,
		qty(c.Resources.Requests, "cpu"), qty(c.Resources.Requests, "example.com/gpu")}
	want := []any{corev1.RestartPolicyAlways, int64(30), "default-scheduler", "ClusterFirst", corev1.PodPending,
		"/dev/termination-log", "File", corev1.PullPolicy("IfNotPresent"), corev1.PullPolicy("IfNotPresent"),
		"500m", "1"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("default %d = %v, want %v", i, got[i], want[i])
		}
	}
	expectErrs(t, immutable(again, pod, nil))
	expectErrs(t, ValidatePod(pod))
}

func qty(l corev1.ResourceList, name string) string {
	q, ok := l[corev1.ResourceName(name)]
	if !ok {
		return "<none>"
	}
	return q.String()
}
