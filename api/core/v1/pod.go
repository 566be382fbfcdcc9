package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Limits of a pod's lists that allot adds. A pod's binding writes every
// claim of the pod in one etcd transaction, which holds a bounded number
// of operations.
const (
	PodResourceClaimsMaxSize = 32
	// BindingAllocationFencesMaxSize bounds a binding's fences: one per
	// (node, driver) it allocates from.
	BindingAllocationFencesMaxSize = 32
)

// +genclient
// +kubebuilder:object:root=true

// Pod is a group of containers that run together on one node.
type Pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodSpec   `json:"spec,omitempty"`
	Status            PodStatus `json:"status,omitempty"`
}

// RestartPolicy says when containers are restarted.
type RestartPolicy string

// Restart policies.
const (
	RestartPolicyAlways    RestartPolicy = "Always"
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	RestartPolicyNever     RestartPolicy = "Never"
)

// PodSpec is the subset of Kubernetes' pod spec that allot runs.
type PodSpec struct {
	InitContainers                []Container       `json:"initContainers,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Containers                    []Container       `json:"containers" patchStrategy:"merge" patchMergeKey:"name"`
	RestartPolicy                 RestartPolicy     `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64            `json:"terminationGracePeriodSeconds,omitempty"`
	ActiveDeadlineSeconds         *int64            `json:"activeDeadlineSeconds,omitempty"`
	DNSPolicy                     string            `json:"dnsPolicy,omitempty"`
	NodeSelector                  map[string]string `json:"nodeSelector,omitempty"`
	ServiceAccountName            string            `json:"serviceAccountName,omitempty"`
	NodeName                      string            `json:"nodeName,omitempty"`
	Hostname                      string            `json:"hostname,omitempty"`
	Affinity                      *Affinity         `json:"affinity,omitempty"`
	SchedulerName                 string            `json:"schedulerName,omitempty"`
	Tolerations                   []Toleration      `json:"tolerations,omitempty"`
	PriorityClassName             string            `json:"priorityClassName,omitempty"`
	Priority                      *int32            `json:"priority,omitempty"`
	EnableServiceLinks            *bool             `json:"enableServiceLinks,omitempty"`
	// ResourceClaims names the claims the pod's containers may use.
	// ResourceClaims holds at most PodResourceClaimsMaxSize entries.
	ResourceClaims []PodResourceClaim `json:"resourceClaims,omitempty" patchStrategy:"merge,retainKeys" patchMergeKey:"name"`
}

// PodResourceClaim names one claim of the pod: either an existing
// ResourceClaim (ResourceClaimName) or a ResourceClaimTemplate from which a
// claim is generated for this pod (ResourceClaimTemplateName). Exactly one
// must be set.
type PodResourceClaim struct {
	Name                      string  `json:"name"`
	ResourceClaimName         *string `json:"resourceClaimName,omitempty"`
	ResourceClaimTemplateName *string `json:"resourceClaimTemplateName,omitempty"`
}

// PullPolicy says when an image is pulled. allot's images are local, so it is
// accepted for compatibility and otherwise ignored.
type PullPolicy string

// Container is one process in a pod.
type Container struct {
	Name                     string               `json:"name"`
	Image                    string               `json:"image,omitempty"`
	Command                  []string             `json:"command,omitempty"`
	Args                     []string             `json:"args,omitempty"`
	WorkingDir               string               `json:"workingDir,omitempty"`
	Ports                    []ContainerPort      `json:"ports,omitempty" patchStrategy:"merge" patchMergeKey:"containerPort"`
	Env                      []EnvVar             `json:"env,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
	Resources                ResourceRequirements `json:"resources,omitempty"`
	ImagePullPolicy          PullPolicy           `json:"imagePullPolicy,omitempty"`
	TerminationMessagePath   string               `json:"terminationMessagePath,omitempty"`
	TerminationMessagePolicy string               `json:"terminationMessagePolicy,omitempty"`
}

// ContainerPort is informational: allot does not set up pod networking.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	HostPort      int32  `json:"hostPort,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// EnvVar is one environment variable of a container.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource takes a variable's value from the pod's own fields.
type EnvVarSource struct {
	FieldRef *ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// ObjectFieldSelector selects a field of the pod, such as metadata.name.
type ObjectFieldSelector struct {
	APIVersion string `json:"apiVersion,omitempty"`
	FieldPath  string `json:"fieldPath"`
}

// ResourceRequirements are a container's requests and limits, and the claims
// of its pod that it uses.
type ResourceRequirements struct {
	Limits   ResourceList    `json:"limits,omitempty"`
	Requests ResourceList    `json:"requests,omitempty"`
	Claims   []ResourceClaim `json:"claims,omitempty"`
}

// ResourceClaim names one entry of the pod's spec.resourceClaims that this
// container uses.
type ResourceClaim struct {
	Name    string `json:"name"`
	Request string `json:"request,omitempty"`
}

// PodPhase is the pod's place in its lifecycle.
type PodPhase string

// Pod phases.
const (
	PodPending   PodPhase = "Pending"
	PodRunning   PodPhase = "Running"
	PodSucceeded PodPhase = "Succeeded"
	PodFailed    PodPhase = "Failed"
	PodUnknown   PodPhase = "Unknown"
)

// PodConditionType names a pod condition. Any type is accepted, so
// components can record facts such as ResourceClaimsUnprepared.
type PodConditionType string

// Well-known pod conditions.
const (
	PodScheduled    PodConditionType = "PodScheduled"
	PodInitialized  PodConditionType = "Initialized"
	ContainersReady PodConditionType = "ContainersReady"
	PodReady        PodConditionType = "Ready"
	// PodResourceClaimsUnprepared is True once the node agent has unprepared
	// every claim of a terminated pod.
	PodResourceClaimsUnprepared PodConditionType = "ResourceClaimsUnprepared"
	// PodResourceClaimsAllocated is written by the scheduler on a pod given
	// a node by hand: False (with the reason) while it cannot allocate and
	// reserve the pod's claims on that node, True once it has.
	PodResourceClaimsAllocated PodConditionType = "ResourceClaimsAllocated"
)

// PodReasonUnschedulable is the PodScheduled=False reason of a pod that fits
// no node.
const PodReasonUnschedulable = "Unschedulable"

// PodCondition is one observed fact about a pod.
type PodCondition struct {
	Type               PodConditionType `json:"type"`
	Status             ConditionStatus  `json:"status"`
	LastProbeTime      metav1.Time      `json:"lastProbeTime,omitempty"`
	LastTransitionTime metav1.Time      `json:"lastTransitionTime,omitempty"`
	Reason             string           `json:"reason,omitempty"`
	Message            string           `json:"message,omitempty"`
}

// PodStatus is the pod's observed state.
type PodStatus struct {
	Phase                 PodPhase                 `json:"phase,omitempty"`
	Conditions            []PodCondition           `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	Message               string                   `json:"message,omitempty"`
	Reason                string                   `json:"reason,omitempty"`
	NominatedNodeName     string                   `json:"nominatedNodeName,omitempty"`
	HostIP                string                   `json:"hostIP,omitempty"`
	PodIP                 string                   `json:"podIP,omitempty"`
	StartTime             *metav1.Time             `json:"startTime,omitempty"`
	InitContainerStatuses []ContainerStatus        `json:"initContainerStatuses,omitempty"`
	ContainerStatuses     []ContainerStatus        `json:"containerStatuses,omitempty"`
	QOSClass              string                   `json:"qosClass,omitempty"`
	ResourceClaimStatuses []PodResourceClaimStatus `json:"resourceClaimStatuses,omitempty" patchStrategy:"merge,retainKeys" patchMergeKey:"name"`
	// ExtendedResourceClaimStatus names the ResourceClaim the scheduler
	// made for the pod's extended resources that DRA serves on its node
	// (a DeviceClass's extendedResourceName, or
	// deviceclass.resource.kubernetes.io/CLASS), and which request of it
	// serves which container's resource. Set when the pod is bound.
	ExtendedResourceClaimStatus *PodExtendedResourceClaimStatus `json:"extendedResourceClaimStatus,omitempty"`
}

// PodExtendedResourceClaimStatus is the claim made for a pod's extended
// resources served by DRA (Kubernetes' field of the same name).
type PodExtendedResourceClaimStatus struct {
	// RequestMappings says which request of the claim serves which
	// container's extended resource.
	RequestMappings []ContainerExtendedResourceRequest `json:"requestMappings"`
	// ResourceClaimName is the claim's name, in the pod's namespace.
	ResourceClaimName string `json:"resourceClaimName"`
}

// ContainerExtendedResourceRequest maps one container's extended resource
// to the request of the pod's extended-resource claim that serves it.
type ContainerExtendedResourceRequest struct {
	ContainerName string `json:"containerName"`
	ResourceName  string `json:"resourceName"`
	RequestName   string `json:"requestName"`
}

// PodResourceClaimStatus records the name of the claim generated for a
// template entry of spec.resourceClaims. ResourceClaimName is nil when no
// claim is needed.
type PodResourceClaimStatus struct {
	Name              string  `json:"name"`
	ResourceClaimName *string `json:"resourceClaimName,omitempty"`
}

// ContainerStatus is the observed state of one container.
type ContainerStatus struct {
	Name                     string           `json:"name"`
	State                    ContainerState   `json:"state,omitempty"`
	LastTerminationState     ContainerState   `json:"lastState,omitempty"`
	Ready                    bool             `json:"ready"`
	RestartCount             int32            `json:"restartCount"`
	Image                    string           `json:"image"`
	ImageID                  string           `json:"imageID"`
	ContainerID              string           `json:"containerID,omitempty"`
	Started                  *bool            `json:"started,omitempty"`
	AllocatedResourcesStatus []ResourceStatus `json:"allocatedResourcesStatus,omitempty"`
}

// ResourceStatus is the health of the devices a container holds from one
// resource (an extended resource name or "claim:NAME").
type ResourceStatus struct {
	Name      string           `json:"name"`
	Resources []ResourceHealth `json:"resources,omitempty"`
}

// ResourceHealthStatus is Healthy, Unhealthy or Unknown.
type ResourceHealthStatus string

// Device health values.
const (
	ResourceHealthStatusHealthy   ResourceHealthStatus = "Healthy"
	ResourceHealthStatusUnhealthy ResourceHealthStatus = "Unhealthy"
	ResourceHealthStatusUnknown   ResourceHealthStatus = "Unknown"
)

// ResourceHealth is the health of one device.
type ResourceHealth struct {
	ResourceID string               `json:"resourceID"`
	Health     ResourceHealthStatus `json:"health,omitempty"`
}

// ContainerState has exactly one of its members set.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting is a container not yet started.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning is a running container.
type ContainerStateRunning struct {
	StartedAt metav1.Time `json:"startedAt,omitempty"`
}

// ContainerStateTerminated is a container that exited.
type ContainerStateTerminated struct {
	ExitCode    int32       `json:"exitCode"`
	Signal      int32       `json:"signal,omitempty"`
	Reason      string      `json:"reason,omitempty"`
	Message     string      `json:"message,omitempty"`
	StartedAt   metav1.Time `json:"startedAt,omitempty"`
	FinishedAt  metav1.Time `json:"finishedAt,omitempty"`
	ContainerID string      `json:"containerID,omitempty"`
}

// +kubebuilder:object:root=true

// PodList is a list of pods.
type PodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pod `json:"items"`
}
