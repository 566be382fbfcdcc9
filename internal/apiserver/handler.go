package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/internal/apiserver/auth"
)

type userKey struct{}

// userFrom returns the authenticated user of a request context.
func userFrom(ctx context.Context) auth.User {
	u, _ := ctx.Value(userKey{}).(auth.User)
	return u
}

func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Authenticator == nil {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, auth.User{Name: "admin", Role: auth.RoleAdmin}))
			next.ServeHTTP(w, r)
			return
		}
		u, ok := s.cfg.Authenticator.AuthenticateRequest(r)
		if !ok {
			if auth.IsPublicPath(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			writeError(w, apierrors.NewUnauthorized("a valid bearer token is required"))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		next.ServeHTTP(w, r)
	})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if s.serveAlias(w, r) {
		return
	}
	ri := parseRequest(r)
	if !ri.isResource {
		s.serveDiscovery(w, r, ri)
		return
	}
	k := s.reg.get(ri.gvr())
	if k == nil {
		writeError(w, apierrors.NewNotFound(ri.gvr().GroupResource(), ri.name))
		return
	}
	if k.namespaced != (ri.namespace != "") && ri.name != "" {
		if k.namespaced {
			writeError(w, apierrors.NewBadRequest("the resource "+k.resource+" is namespaced: use /namespaces/NAMESPACE/"+k.resource))
		} else {
			writeError(w, apierrors.NewNotFound(ri.gvr().GroupResource(), ri.name))
		}
		return
	}
	if len(ri.parts) > 3 || (ri.subresource != "" && !s.knownSubresource(k, ri.subresource)) {
		writeError(w, apierrors.NewNotFound(ri.gvr().GroupResource(), ri.name+"/"+ri.subresource))
		return
	}
	s.dispatch(w, r, k, &ri)
}

func (s *Server) knownSubresource(k *kind, sub string) bool {
	switch sub {
	case "status":
		return k.hasStatus
	case "binding", "log":
		return k.gvk.Group == "" && k.resource == "pods"
	case "finalize":
		return k.gvk.Group == "" && k.resource == "namespaces"
	}
	return false
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	if opts := optionsKindOf(ri.verb); opts != "" {
		dry, err := checkDryRun(r.URL.Query()["dryRun"], opts)
		if err != nil {
			writeError(w, err)
			return
		}
		if dry {
			r = r.WithContext(withDryRun(r.Context()))
		}
	}
	switch ri.verb {
	case "create", "update", "patch":
		if err := checkWriteOptions(r, ri.verb, isApply(r)); err != nil {
			writeError(w, err)
			return
		}
		ri.manager = managerOf(r)
	}
	switch {
	case ri.subresource == "binding":
		if ri.verb != "create" {
			writeError(w, apierrors.NewMethodNotSupported(k.groupResource(), ri.verb))
			return
		}
		s.serveBinding(w, r, k, ri)
	case ri.subresource == "log":
		s.serveLog(w, r, k, ri)
	case ri.verb == "get":
		s.serveGet(w, r, k, ri)
	case ri.verb == "list":
		s.serveList(w, r, k, ri)
	case ri.verb == "watch":
		s.serveWatch(w, r, k, ri)
	case ri.verb == "create" && ri.name == "":
		s.serveCreate(w, r, k, ri)
	case ri.verb == "update":
		s.serveUpdate(w, r, k, ri)
	case ri.verb == "patch":
		s.servePatch(w, r, k, ri)
	case ri.verb == "delete":
		s.serveDelete(w, r, k, ri)
	case ri.verb == "deletecollection" && k.namespaced && ri.namespace == "":
		// As Kubernetes: a namespaced resource's cluster-wide path
		// serves list and watch only; a collection is deleted one
		// namespace at a time.
		writeError(w, crossNamespaceDelete(k))
	case ri.verb == "deletecollection":
		s.serveDeleteCollection(w, r, k, ri)
	default:
		writeError(w, apierrors.NewMethodNotSupported(k.groupResource(), ri.verb))
	}
}

// maxDrainBytes bounds how much of a body over the limit the server reads
// and discards so that the client, which may be sending it whole, gets
// the 413 and can reuse the connection. A larger body gets its 413 with
// "Connection: close" instead.
const maxDrainBytes = 32 << 20

// readBody reads a request body within the size limit. A body over it
// gets 413 and is drained (up to maxDrainBytes more), not cut off:
// closing the connection while an HTTP/1.1 client still writes the body
// makes it see a broken connection (over TLS an EOF) instead of the
// answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxRequestBytes
	tooLarge := func() error {
		msg := fmt.Sprintf("the request body exceeds the limit of %d bytes", limit)
		if r.ContentLength > 0 {
			msg = fmt.Sprintf("the request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
		}
		return apierrors.NewRequestEntityTooLargeError(msg)
	}
	if r.ContentLength > limit+maxDrainBytes {
		w.Header().Set("Connection", "close")
		return nil, tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, apierrors.NewBadRequest("read request body: " + err.Error())
	}
	if int64(len(data)) <= limit {
		return data, nil
	}
	if _, err := io.CopyN(io.Discard, r.Body, maxDrainBytes); err != io.EOF {
		// More than the drain bound, or a broken body: not worth
		// keeping the connection for.
		w.Header().Set("Connection", "close")
	}
	return nil, tooLarge()
}

// authorize checks the request with the object(s) it touches.
func (s *Server) authorize(ctx context.Context, k *kind, ri *requestInfo, verb string, obj, old runtime.Object) error {
	return s.authorizeAttrs(ctx, k, ri, auth.Attributes{Verb: verb, Object: obj, OldObject: old})
}

// authorizeSelected checks a list, watch or deletecollection with its
// parsed field selector.
func (s *Server) authorizeSelected(ctx context.Context, k *kind, ri *requestInfo, verb string, fs fields.Requirements) error {
	return s.authorizeAttrs(ctx, k, ri, auth.Attributes{Verb: verb, FieldSelector: fs})
}

// authorizeAttrs fills a's user and resource from the request and asks
// the authorizer.
func (s *Server) authorizeAttrs(ctx context.Context, k *kind, ri *requestInfo, a auth.Attributes) error {
	a.User = userFrom(ctx)
	a.APIGroup, a.Resource, a.Namespaced = k.gvk.Group, k.resource, k.namespaced
	a.Subresource, a.Namespace, a.Name = ri.subresource, ri.namespace, ri.name
	d := auth.Authorize(ctx, a, s.lookup())
	if d.Allowed {
		return nil
	}
	reason := d.Reason
	if reason == "" {
		reason = "not allowed"
	}
	return apierrors.NewForbidden(k.groupResource(), ri.name, errors.New(strings.TrimSpace(reason)))
}

// crossNamespaceDelete is the 405 answer to DELETE on the cluster-wide
// collection path of a namespaced resource.
func crossNamespaceDelete(k *kind) error {
	err := apierrors.NewMethodNotSupported(k.groupResource(), "deletecollection")
	err.ErrStatus.Message = fmt.Sprintf("the server does not allow this method on the requested resource: %s are deleted as a collection one namespace at a time (DELETE .../namespaces/NAMESPACE/%s), not across namespaces",
		k.groupResource(), k.resource)
	return err
}
