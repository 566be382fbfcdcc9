package storage

import (
	"allot.dev/allot/internal/atomicfile"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap/zapcore"
)

// EndpointFile is the file in the data directory that holds the client URL
// of a running embedded etcd, so operators can find it.
const EndpointFile = "etcd-endpoint"

// EmbeddedConfig configures StartEmbedded.
type EmbeddedConfig struct {
	// DataDir holds etcd's data; it is created if missing. Required.
	DataDir string
	// ClientURL and PeerURL (e.g. http://127.0.0.1:23790) are optional;
	// when empty a free 127.0.0.1 port is chosen at start.
	ClientURL, PeerURL string
	// Logger receives etcd's warnings and errors (default slog.Default()).
	Logger *slog.Logger
	// QuotaBackendBytes is the backend size quota (0 = etcd default, 2 GiB).
	QuotaBackendBytes int64
	// MaxRequestBytes is the largest request etcd accepts (0 = 2 MiB, which
	// fits a DefaultMaxValueBytes value plus its key).
	MaxRequestBytes uint
	// StartTimeout bounds the wait for the server to become ready (0 = 60s).
	StartTimeout time.Duration
	// UnsafeNoFsync disables fsync; for tests only, data may be lost on
	// power failure.
	UnsafeNoFsync bool
	// DiskReserveBytes is the free space kept on the data directory's
	// disk: below it CheckSpace reports ErrNoSpace, so a Store built
	// WithWriteGuard(e.CheckSpace) refuses writes before etcd runs out
	// (which would end the process). 0 = DefaultDiskReserveBytes; < 0
	// turns the guard off.
	DiskReserveBytes int64
	// SpaceCheckInterval is how often the member looks for its NOSPACE
	// alarm to recover from it (0 = DefaultSpaceCheckInterval).
	SpaceCheckInterval time.Duration
}

// Embedded is a running single-member etcd inside this process.
type Embedded struct {
	etcd      *embed.Etcd
	closing   *atomic.Bool // demotes shutdown noise in etcd's log
	dataDir   string
	endpoints []string
	closeOnce sync.Once
	guard     *DiskGuard    // nil when DiskReserveBytes < 0
	stopSpace chan struct{} // ends superviseSpace
	spaceDone chan struct{} // closed when it ended; nil before it started
}

const (
	defaultMaxRequestBytes = 2 << 20
	// embeddedCatchUpEntries is the single member's raft catch-up window.
	embeddedCatchUpEntries = 100
	defaultStartTimeout    = 60 * time.Second
	bindAttempts           = 5
)

// StartEmbedded starts a single-member etcd in cfg.DataDir and waits until
// it serves clients. Restarting on the same DataDir keeps the data; an
// auto-chosen client port is reused when still free, else another is
// picked. The client endpoint is written to DataDir/etcd-endpoint.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start embedded etcd: DataDir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create etcd data dir: %w", err)
	}
	// etcd warns unless its data directory is private.
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict etcd data dir: %w", err)
	}
	autoPorts := cfg.ClientURL == "" || cfg.PeerURL == ""
	var lastErr error
	for attempt := 0; attempt < bindAttempts; attempt++ {
		try := cfg
		if attempt == 0 && try.ClientURL == "" {
			try.ClientURL = previousClientURL(cfg.DataDir)
		}
		closing := new(atomic.Bool)
		ecfg, err := embedConfig(try, closing)
		if err != nil {
			return nil, err
		}
		e, err := embed.StartEtcd(ecfg)
		if err == nil {
			return finishStart(ctx, cfg, e, closing)
		}
		lastErr = err
		if !autoPorts || !isAddrInUse(err) {
			break
		}
	}
	return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.DataDir, lastErr)
}

// previousClientURL returns the loopback client URL recorded by the last
// run in dataDir, or "".
func previousClientURL(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, EndpointFile))
	if err != nil {
		return "" // first start, or unreadable: pick a fresh port
	}
	u := strings.TrimSpace(string(b))
	if strings.Contains(u, ",") || !strings.HasPrefix(u, "http://127.0.0.1:") {
		return ""
	}
	return u
}

func finishStart(ctx context.Context, cfg EmbeddedConfig, e *embed.Etcd, closing *atomic.Bool) (*Embedded, error) {
	if err := waitServing(ctx, e, cfg.StartTimeout); err != nil {
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("wait for embedded etcd: %w", err)
	}
	em := &Embedded{etcd: e, closing: closing, dataDir: cfg.DataDir}
	if cfg.DiskReserveBytes >= 0 {
		em.guard = NewDiskGuard(cfg.DataDir, cfg.DiskReserveBytes)
	}
	for _, u := range e.Config().AdvertiseClientUrls {
		em.endpoints = append(em.endpoints, u.String())
	}
	if err := em.updatePeerURLs(ctx); err != nil {
		em.Close()
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(cfg.DataDir, EndpointFile), []byte(strings.Join(em.endpoints, ",")+"\n"), 0o600); err != nil {
		em.Close()
		return nil, err
	}
	interval := cfg.SpaceCheckInterval
	if interval <= 0 {
		interval = DefaultSpaceCheckInterval
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	em.stopSpace, em.spaceDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(em.spaceDone)
		em.superviseSpace(em.stopSpace, interval, logger.With("component", "etcd"))
	}()
	return em, nil
}

// CheckSpace reports a *NoSpaceError while the data directory's disk is
// below the reserve (EmbeddedConfig.DiskReserveBytes), nil otherwise.
// Pass it to WithWriteGuard.
func (e *Embedded) CheckSpace() error {
	if e.guard == nil {
		return nil
	}
	return e.guard.Check()
}

// updatePeerURLs records the current peer URL in the cluster membership
// when a restart picked a different port than the one stored in DataDir.
func (e *Embedded) updatePeerURLs(ctx context.Context) error {
	var want []string
	for _, u := range e.etcd.Config().AdvertisePeerUrls {
		want = append(want, u.String())
	}
	id := uint64(e.etcd.Server.MemberID())
	m := e.etcd.Server.Cluster().Member(e.etcd.Server.MemberID())
	if m == nil || slices.Equal(m.PeerURLs, want) {
		return nil
	}
	c, err := NewClient(ctx, e.endpoints, nil)
	if err != nil {
		return fmt.Errorf("update embedded etcd peer URL: %w", err)
	}
	defer c.Close()
	uctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
	defer cancel()
	if _, err := c.MemberUpdate(uctx, id, want); err != nil {
		return fmt.Errorf("update embedded etcd peer URL to %v: %w", want, err)
	}
	return nil
}

// waitServing waits until e serves clients.
func waitServing(ctx context.Context, e *embed.Etcd, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return err
	case <-e.Server.StopNotify():
		return errors.New("server stopped during start")
	case <-timer.C:
		return fmt.Errorf("not ready after %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// embedConfig translates cfg into etcd's configuration, picking free
// ports for unset URLs.
func embedConfig(cfg EmbeddedConfig, closing *atomic.Bool) (*embed.Config, error) {
	clientURL, peerURL := cfg.ClientURL, cfg.PeerURL
	if clientURL == "" || peerURL == "" {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		if clientURL == "" {
			clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		}
		if peerURL == "" {
			peerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		}
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("parse client URL %q: %w", clientURL, err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, fmt.Errorf("parse peer URL %q: %w", peerURL, err)
	}
	ec := embed.NewConfig()
	ec.Name = "allot"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.InitialClusterToken = "allot-embedded"
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.MaxRequestBytes = cfg.MaxRequestBytes
	if ec.MaxRequestBytes == 0 {
		ec.MaxRequestBytes = defaultMaxRequestBytes
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	// etcd keeps this many applied raft entries in memory for followers
	// to catch up from (default 5,000); a single member has none, so they
	// only held 5,000 recent writes, managedFields included, on the heap
	// (bench/README.md, "Session 15: peak memory").
	ec.SnapshotCatchUpEntries = embeddedCatchUpEntries
	ec.Metrics = "basic"
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger, "etcd", zapcore.WarnLevel, closing))
	return ec, nil
}

// Endpoints returns the client URLs of the embedded etcd.
func (e *Embedded) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// DataDir returns the data directory.
func (e *Embedded) DataDir() string { return e.dataDir }

// Close stops etcd and waits for it to release the data directory.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		if e.spaceDone != nil { // stop the NOSPACE supervisor before etcd
			close(e.stopSpace)
			<-e.spaceDone
		}
		e.closing.Store(true)
		e.etcd.Close()
		<-e.etcd.Server.StopNotify()
	})
	return nil
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago. Another process may take them before they are used; callers
// retry on bind conflicts.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// Client connection defaults for NewClient.
const (
	clientDialTimeout      = 5 * time.Second
	clientKeepAliveTime    = 30 * time.Second
	clientKeepAliveTimeout = 10 * time.Second
)

// NewClient connects to etcd at endpoints (one member or a whole cluster)
// with a dial timeout and keepalives, and checks that at least one member
// answers. tlsCfg may be nil for plain HTTP endpoints.
func NewClient(ctx context.Context, endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("connect to etcd: no endpoints")
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          clientDialTimeout,
		DialKeepAliveTime:    clientKeepAliveTime,
		DialKeepAliveTimeout: clientKeepAliveTimeout,
		TLS:                  tlsCfg,
		Logger:               newZapLogger(nil, "etcd-client", zapcore.ErrorLevel, nil),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	pctx, cancel := context.WithTimeout(ctx, clientDialTimeout)
	defer cancel()
	// A serializable read is answered by any member, quorum or not.
	if _, err := c.Get(pctx, "\x00", clientv3.WithSerializable(), clientv3.WithCountOnly()); err != nil {
		c.Close()
		return nil, fmt.Errorf("reach etcd %v: %w", endpoints, err)
	}
	return c, nil
}

// InProcessClient returns a client that calls the embedded member directly,
// without gRPC or sockets: the API server of `allot up` uses it to spare
// every request a marshal and a loopback round trip. Close it before the
// member.
func (e *Embedded) InProcessClient() *clientv3.Client {
	return v3client.New(e.etcd.Server)
}
