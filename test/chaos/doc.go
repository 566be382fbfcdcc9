// Package chaos is allot's own chaos suite: it runs a whole cluster as
// separate processes (cluster.go), kills them with SIGKILL at random while
// pods with resource claims come and go (run.go), takes the API server
// down for longer than the node agents' fence time (fence.go), then checks
// that nothing was lost, leaked or handed out twice (invariants.go) and
// that the fence stopped no pod it must spare (fence.go). README.md
// describes the flow, the flags and the report.
package chaos
