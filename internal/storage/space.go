package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdstorage "go.etcd.io/etcd/server/v3/storage"
)

// ErrNoSpace means etcd cannot take writes for want of space: its NOSPACE
// alarm is active (the database reached its quota), or the disk under an
// embedded member's data directory is below the reserve allot keeps.
// Reads still work. Errors that wrap it are *NoSpaceError, which says
// which of the two.
var ErrNoSpace = errors.New("storage: no space to write")

// NoSpaceError says why etcd cannot write; it unwraps to ErrNoSpace.
type NoSpaceError struct {
	// Cause names the condition, e.g. "database space exceeded: ...".
	Cause string
}

func (e *NoSpaceError) Error() string {
	return "etcd cannot write: no space left on device (" + e.Cause + ")"
}

// Unwrap returns ErrNoSpace.
func (e *NoSpaceError) Unwrap() error { return ErrNoSpace }

// quotaCause is the cause reported for etcd's own NOSPACE answer.
const quotaCause = "database space exceeded: the etcd database reached its size quota"

// noSpaceErr translates etcd's answers that mean "no space" into a
// *NoSpaceError (keeping err in the chain), or returns nil. etcd answers
// a write refused by its quota or NOSPACE alarm with "etcdserver: mvcc:
// database space exceeded"; an external member whose disk is full
// reports ENOSPC in the error text (or, more often, dies: see
// docs/operator-guide.md).
func noSpaceErr(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) ||
		strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error()):
		return fmt.Errorf("%w: %w", &NoSpaceError{Cause: quotaCause}, err)
	case errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), syscall.ENOSPC.Error()):
		return fmt.Errorf("%w: %w", &NoSpaceError{Cause: "the etcd data disk is full"}, err)
	}
	return nil
}

// DefaultDiskReserveBytes is the free space an embedded etcd's disk keeps:
// below it allot refuses writes (ErrNoSpace) rather than let etcd run out,
// since etcd ends the whole process when a write of its log or database
// fails with ENOSPC. It covers one new 64 MiB log segment, which etcd
// allocates in advance, and the writes under way.
const DefaultDiskReserveBytes = 128 << 20

// DiskGuard refuses writes while the free space of the file system holding
// a directory is below a reserve. Once it refused, it lets writes through
// again only when a quarter of the reserve more is free, so a disk at the
// edge does not flap.
type DiskGuard struct {
	dir     string
	reserve int64
	free    func(dir string) (int64, error)

	mu  sync.Mutex
	low bool
}

// NewDiskGuard returns a guard for the file system of dir with the given
// reserve in bytes (<= 0: DefaultDiskReserveBytes).
func NewDiskGuard(dir string, reserve int64) *DiskGuard {
	if reserve <= 0 {
		reserve = DefaultDiskReserveBytes
	}
	return &DiskGuard{dir: dir, reserve: reserve, free: freeBytes}
}

// Check returns a *NoSpaceError while the disk is below the reserve, and
// nil otherwise (also when the free space cannot be read: etcd is then
// left to try). It costs one statfs call.
func (g *DiskGuard) Check() error {
	free, err := g.free(g.dir)
	if err != nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	need := g.reserve
	if g.low {
		need += g.reserve / 4
	}
	if free >= need {
		g.low = false
		return nil
	}
	g.low = true
	return &NoSpaceError{Cause: fmt.Sprintf("%s free on the disk of the etcd data directory %s, below the %s allot keeps free; writes resume from %s free",
		formatBytes(free), g.dir, formatBytes(g.reserve), formatBytes(g.reserve+g.reserve/4))}
}

// Free returns the free space of the guarded file system.
func (g *DiskGuard) Free() (int64, error) { return g.free(g.dir) }

func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// DefaultSpaceCheckInterval is how often an embedded etcd looks for its
// NOSPACE alarm to recover from it.
const DefaultSpaceCheckInterval = 10 * time.Second

// spaceState is what the NOSPACE supervisor of an embedded member
// remembers between checks, so each condition is logged once.
type spaceState struct {
	alarmed   bool   // the alarm was active at the last check
	reported  string // the last condition logged while alarmed
	triedRev  int64  // the revision of the last recovery attempt
	triedSize int64  // the database size after it
}

// superviseSpace watches the member's NOSPACE alarm until stop closes and
// recovers from it: once the disk has room, it compacts to the current
// revision, defragments and, when the database is then below 90% of its
// quota, disarms the alarm. A database still too large stays alarmed until
// objects are deleted (deletes work under the alarm) or the quota is
// raised; the attempt is repeated only when the store changed.
func (e *Embedded) superviseSpace(stop <-chan struct{}, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	c := e.InProcessClient()
	defer c.Close()
	var st spaceState
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		e.checkSpace(ctx, c, &st, logger)
		cancel()
	}
}

// quota returns the member's backend quota.
func (e *Embedded) quota() int64 {
	if q := e.etcd.Config().QuotaBackendBytes; q > 0 {
		return q
	}
	return etcdstorage.DefaultQuotaBytes
}

func (e *Embedded) noSpaceAlarm() bool {
	for _, a := range e.etcd.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

func (e *Embedded) checkSpace(ctx context.Context, c *clientv3.Client, st *spaceState, logger *slog.Logger) {
	if !e.noSpaceAlarm() {
		if st.alarmed {
			logger.Info("etcd's NOSPACE alarm is off: etcd takes writes again")
		}
		*st = spaceState{}
		return
	}
	report := func(level slog.Level, msg string, args ...any) {
		if st.reported != msg {
			st.reported = msg
			logger.Log(ctx, level, msg, args...)
		}
	}
	if !st.alarmed {
		st.alarmed = true
		report(slog.LevelError, "etcd's NOSPACE alarm is active: the database reached its quota; writes are refused, reads still served",
			"size", formatBytes(e.etcd.Server.Backend().Size()), "quota", formatBytes(e.quota()))
	}
	if e.guard != nil {
		if err := e.guard.Check(); err != nil {
			report(slog.LevelError, "etcd's NOSPACE alarm stays on until the disk has room", "err", err)
			return
		}
	}
	rev := e.etcd.Server.KV().Rev()
	size := e.etcd.Server.Backend().Size()
	if rev == st.triedRev && size == st.triedSize {
		return // nothing changed since the last attempt
	}
	inUse := e.etcd.Server.Backend().SizeInUse()
	if e.guard != nil {
		if free, err := e.guard.Free(); err == nil && free < inUse+e.guard.reserve {
			report(slog.LevelError, "etcd's NOSPACE alarm stays on: defragmentation needs room for a copy of the database",
				"free", formatBytes(free), "inUse", formatBytes(inUse))
			return
		}
	}
	st.triedRev = rev
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		logger.Warn("compact etcd to recover from NOSPACE", "revision", rev, "err", err)
		return
	}
	// As the Maintenance API's Defragment does (whose in-process server
	// has no health notifier to call).
	if err := e.etcd.Server.Backend().Defrag(); err != nil {
		logger.Warn("defragment etcd to recover from NOSPACE", "err", err)
		return
	}
	size = e.etcd.Server.Backend().Size()
	st.triedSize = size
	if size >= e.quota()/10*9 {
		report(slog.LevelWarn, "etcd's database is still near its quota after compaction and defragmentation: delete objects (deletes still work) or raise the quota; allot tries again when the store changes",
			"size", formatBytes(size), "quota", formatBytes(e.quota()))
		return
	}
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: uint64(e.etcd.Server.MemberID()), Alarm: pb.AlarmType_NOSPACE}); err != nil {
		logger.Warn("disarm etcd's NOSPACE alarm", "err", err)
		return
	}
	logger.Info("etcd's NOSPACE alarm disarmed after compaction and defragmentation: writes resume",
		"size", formatBytes(size), "quota", formatBytes(e.quota()))
	*st = spaceState{}
}
