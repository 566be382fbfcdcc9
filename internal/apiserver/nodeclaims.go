package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver/auth"
)

// keepPreparedClaims holds a Node's status.preparedResourceClaims to its
// node (and admins, whose credentials a node agent may run with): in a
// write by anyone else (the node lifecycle controller, another node, a
// driver) the list stays as stored (none on create). The claim controller releases
// devices on what it says, so only the agent that prepares and
// unprepares may change it; an operator who knows a node is gone deletes
// the Node or taints it node.kubernetes.io/out-of-service instead. A
// server without authentication cannot tell the node apart and keeps
// what is written.
func (s *Server) keepPreparedClaims(ctx context.Context, obj, cur runtime.Object) {
	n, ok := obj.(*corev1.Node)
	if !ok || s.cfg.Authenticator == nil {
		return
	}
	if u := userFrom(ctx); u.Role == auth.RoleAdmin || u.Role == auth.RoleNode && u.Name == n.Name {
		return
	}
	n.Status.PreparedResourceClaims = nil
	if old, ok := cur.(*corev1.Node); ok {
		n.Status.PreparedResourceClaims = old.Status.PreparedResourceClaims
	}
}
