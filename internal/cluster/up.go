package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver"
	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/controller/manager"
	"allot.dev/allot/internal/dashboard"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/pki"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/storage"
)

// Options configure Up.
type Options struct {
	DataDir            string
	Listen             string
	EtcdServers        []string
	CompactionInterval time.Duration
	// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
	// are the API server's (apiserver.Config).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// EtcdDiskReserve is the free space the embedded etcd keeps on its
	// disk: below it writes are answered 507 (0 = the default, 128 MiB).
	EtcdDiskReserve int64
	// EtcdQuotaBytes is the embedded etcd's backend quota (0 = 2 GiB).
	EtcdQuotaBytes int64
	NodeNames      []string
	TokensFile     string
	// APIServerOnly runs only the API server (allot apiserver).
	APIServerOnly bool
	// Disable names components not to run in-process
	// ("controller-manager").
	Disable []string
	// Controllers configures the in-process controller manager.
	Controllers manager.Config
	// Node configures the local node agent (its timers; identity, client
	// and runtime are filled in by Up). NodeRuntime is runc or fake;
	// NodeRootDir defaults to DATA-DIR/node.
	Node        node.Config
	NodeRuntime string
	NodeRootDir string
	// CDISpecDirs are the local node's CDI spec directories (default
	// /etc/cdi and /var/run/cdi).
	CDISpecDirs []string
	// Scheduler configures the in-process scheduler (its client is filled
	// in by Up).
	Scheduler scheduler.Config
	// Extras are more components to run in this process once the API
	// server listens: the example drivers and the demo of `allot up
	// --demo`.
	Extras []Extra
	Logger *slog.Logger
}

// Extra is a component Up runs beside its own, with its own identity.
type Extra struct {
	// Name names it in logs.
	Name string
	// Driver, when set, runs it with a token of role driver and this
	// driver name (created in the tokens file when missing); otherwise it
	// runs as admin.
	Driver string
	// Run runs until ctx ends. An error is logged; the cluster keeps
	// running.
	Run func(ctx context.Context, rc *rest.Config) error
}

// extraDrivers are the driver identities the extras need tokens for.
func (o Options) extraDrivers() []string {
	var out []string
	for _, e := range o.Extras {
		if e.Driver != "" && !slices.Contains(out, e.Driver) {
			out = append(out, e.Driver)
		}
	}
	return out
}

func (o Options) enabled(component string) bool {
	if o.APIServerOnly {
		return false
	}
	for _, d := range o.Disable {
		if d == component {
			return false
		}
	}
	return true
}

// withMetrics gives the in-process scheduler and controller manager their
// registries (unless the caller did), for the API server to serve on its
// /metrics. The local node agent serves its own on its log server.
func (o Options) withMetrics() (Options, []prometheus.Gatherer) {
	var out []prometheus.Gatherer
	if o.enabled("scheduler") {
		if o.Scheduler.Metrics == nil {
			o.Scheduler.Metrics = scheduler.NewMetrics()
		}
		out = append(out, o.Scheduler.Metrics.Registry)
	}
	if o.enabled("controller-manager") {
		if o.Controllers.Registry == nil {
			o.Controllers.Registry = prometheus.NewRegistry()
		}
		out = append(out, o.Controllers.Registry)
	}
	return o, out
}

// DefaultCompaction is the default etcd compaction interval.
func (Options) DefaultCompaction() time.Duration { return 5 * time.Minute }

// Up runs until ctx ends. It prints where the cluster listens and where its
// kubeconfig is.
func Up(ctx context.Context, o Options, out io.Writer) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	release, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	defer release()
	if o.TokensFile == "" {
		o.TokensFile = filepath.Join(o.DataDir, "tokens.csv")
	}
	if len(o.NodeNames) == 0 {
		h, _ := os.Hostname()
		o.NodeNames = []string{corev1.NodeNameFromHost(h)}
	}
	tokens, err := auth.EnsureTokens(o.TokensFile, o.NodeNames, o.extraDrivers()...)
	if err != nil {
		return fmt.Errorf("set up tokens: %w", err)
	}
	store, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()

	authn, err := auth.NewTokenAuthenticator(o.TokensFile, o.Logger)
	if err != nil {
		return fmt.Errorf("load tokens: %w", err)
	}
	go authn.Run(ctx)
	nodeTLS, err := newNodeTLS(o.DataDir)
	if err != nil {
		return err
	}
	o, gatherers := o.withMetrics()
	srv := apiserver.New(apiserver.Config{Store: store, Authenticator: authn, Logger: o.Logger, NodeTLS: nodeTLS, Metrics: gatherers,
		DefaultNotReadyTolerationSeconds: o.DefaultNotReadyTolerationSeconds, DefaultUnreachableTolerationSeconds: o.DefaultUnreachableTolerationSeconds})
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("start API server: %w", err)
	}
	if o.CompactionInterval > 0 {
		go storage.RunCompactor(ctx, store, o.CompactionInterval, o.Logger)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	tlsCfg, caPEM, err := serverTLS(o.DataDir, addr)
	if err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(clientHost(addr), fmt.Sprint(addr.Port)))
	handler, err := withDashboard(srv.Handler(), o, url, caPEM)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()

	if err := srv.EnsureNamespaces(ctx, "default", "kube-system", "kube-node-lease"); err != nil {
		return fmt.Errorf("create default namespaces: %w", err)
	}
	kc := filepath.Join(o.DataDir, "kubeconfig")
	if err := WriteKubeconfig(kc, url, tokens["admin"], caPEM); err != nil {
		return err
	}
	if err := RememberKubeconfig(kc); err != nil {
		o.Logger.Warn("remember kubeconfig", "err", err)
	}
	fmt.Fprintf(out, "allot API server listening on %s\nkubeconfig: %s\ndashboard: %s\n", url, kc, dashboard.LoginURL(url, tokens["admin"]))
	comps, err := startComponents(ctx, o, url, tokens, caPEM)
	if err != nil {
		return err
	}
	defer comps.wait()

	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}

func openStore(ctx context.Context, o Options) (*storage.Store, func(), error) {
	if len(o.EtcdServers) > 0 {
		c, err := storage.NewClient(ctx, o.EtcdServers, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to etcd %v: %w", o.EtcdServers, err)
		}
		return storage.New(c), func() { c.Close() }, nil
	}
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: filepath.Join(o.DataDir, "etcd"), Logger: o.Logger,
		DiskReserveBytes: o.EtcdDiskReserve, QuotaBackendBytes: o.EtcdQuotaBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	// The API server calls its embedded member in-process: no gRPC marshal,
	// no loopback round trip. Other tools still reach the member on the
	// endpoint recorded in DATA-DIR/etcd.
	c := e.InProcessClient()
	// Writes stop while the data disk is below the reserve: etcd would end
	// the whole process (and leave the pods' containers unsupervised) if
	// its own write failed with ENOSPC.
	return storage.New(c, storage.WithWriteGuard(e.CheckSpace)), func() { c.Close(); e.Close() }, nil
}

// serverTLS creates a CA and a serving certificate for the listening
// address. The server always speaks TLS, even on loopback, because kubectl
// and client-go never send bearer tokens over plain HTTP.
func serverTLS(dataDir string, addr *net.TCPAddr) (*tls.Config, []byte, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("set up CA: %w", err)
	}
	hosts := []string{}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	hosts = append(hosts, localIPs()...)
	if !addr.IP.IsUnspecified() {
		hosts = append(hosts, addr.IP.String())
	}
	certFile, keyFile, err := ca.EnsureServingCert(dir, hosts)
	if err != nil {
		return nil, nil, fmt.Errorf("set up serving certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("load serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, ca.CertPEM(), nil
}

// newNodeTLS sets up how the API server reaches node agents: the cluster
// CA issues their serving certificates (kept in DATA-DIR/pki/nodes) and
// the API server's client certificate towards them.
func newNodeTLS(dataDir string) (*apiserver.NodeTLS, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		return nil, fmt.Errorf("set up CA: %w", err)
	}
	client, err := ca.EnsureNodeClientCert(dir)
	if err != nil {
		return nil, fmt.Errorf("set up the API server's client certificate for node agents: %w", err)
	}
	var ips []net.IP
	for _, s := range localIPs() {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		}
	}
	return &apiserver.NodeTLS{CA: ca, CertDir: filepath.Join(dir, "nodes"), ClientCert: client, HostIPs: ips}, nil
}

func localIPs() []string {
	var out []string
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// clientHost is the host clients should dial for a listening address.
func clientHost(addr *net.TCPAddr) string {
	if addr.IP.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return h
		}
		return "127.0.0.1"
	}
	return addr.IP.String()
}
