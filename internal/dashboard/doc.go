// Package dashboard serves allot's web dashboard: one page, built into the
// binary (plain HTML, CSS and JavaScript, no build step, nothing fetched
// from another origin), that draws every node with its devices and
// partitions, who holds them, and why pending pods are pending.
//
// The handler is mounted beside the API server, on its origin, under
// [Path]. Its static files are public (they hold no data). Everything the
// page shows comes from the API itself: the page lists and watches nodes,
// NodeResourceSlices, ResourceClaims (v1alpha2 and resource.k8s.io/v1),
// v1 ResourceSlices and pods with the bearer token the user logged in with, so the API server authenticates and authorizes
// every read as usual. The one server-side endpoint, [ExplainPath], runs
// `allot explain`'s code (scheduler.ListSnapshot, scheduler.Explain) over
// a client that carries the caller's own token: a request without a token
// gets 401, and a token whose role may not read what explaining needs
// gets the API server's 403.
//
// The login token travels in the URL fragment ([LoginURL]), which
// browsers never send to a server, so it reaches no access log; the page
// moves it to sessionStorage and removes it from the address bar.
package dashboard
