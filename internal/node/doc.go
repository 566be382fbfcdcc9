// Package node is allot's node agent: it registers its Node, heartbeats,
// and runs the pods bound to it through a container runtime. See README.md
// for the pod lifecycle drawn out.
//
// The contract, in the order Run performs it:
//
//  1. Get or renew the log server's serving certificate (the cluster CA's,
//     through the API server; kept in ROOT/pki), bind the log server
//     over TLS (Config.LogListen) and register the Node: labels
//     (Config.Labels, kubernetes.io/hostname, os, arch, allot.dev/cdi),
//     capacity and allocatable (cpu, memory, pods, Config.Capacity),
//     addresses (InternalIP, Hostname), daemonEndpoints.kubeletEndpoint.Port
//     (the log server's port, 0 without one), nodeInfo, and a Ready
//     condition. An existing Node of that name is taken over. Registration
//     is retried until it succeeds or ctx ends.
//  2. List the runtime's containers: those of pods still bound here are
//     adopted by the pods' workers, never restarted.
//  3. Watch the pods with spec.nodeName=NAME and run one pod worker
//     (package pods) per pod UID, fed by the pod's updates.
//  4. Once the watch has synced: stop and remove containers whose pods are
//     gone, and delete their files; then heartbeat every
//     Config.HeartbeatInterval (renew the Lease kube-node-lease/NAME, owned
//     by the Node; write the Node's status, renewing Ready's
//     lastHeartbeatTime, only when it changed, after a failed heartbeat, or
//     every Config.NodeStatusReportFrequency; marking nodes NotReady is
//     the controller manager's job), relist the runtime every Config.RelistInterval to
//     wake the workers of pods whose containers changed, and serve logs.
//     With Config.SelfFenceAfter, fence: stop the pods holding devices
//     other nodes can reach once no heartbeat reached the API server for
//     that long (README.md, "The fence and the return gate"). After the
//     start and after a failed heartbeat, admit no new pod until the pods
//     deleted meanwhile are stopped and their claims unprepared.
//  5. When ctx ends, return, leaving containers running for the next agent.
//
// Writes the agent makes, all within the node authorizer's rules: its own
// Node and nodes/status, its heartbeat Lease, pods/status of its pods, the final deletion of
// its pods (gracePeriodSeconds 0 with a UID precondition), and events.
// Every API call has a deadline (Config.APITimeout).
//
// Extension points for device plugins and DRA: pods.Admitter (and
// pods.Releaser), pods.ContainerConfigurer and pods.HealthReporter in
// Config.Hooks; NodeDecorator for what the Node advertises.
//
// Fleet runs many agents in one process over one shared pod informer, for
// simulated nodes.
package node
