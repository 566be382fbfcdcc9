package storage

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a zap logger that forwards entries at level or above
// to logger and drops everything below, keeping etcd's own output quiet.
// While *closing is true every entry is demoted to debug: a server that is
// shutting down reports its closed listeners as errors.
func newZapLogger(logger *slog.Logger, component string, level zapcore.Level, closing *atomic.Bool) *zap.Logger {
	if logger == nil {
		logger = slog.Default()
	}
	if closing == nil {
		closing = new(atomic.Bool)
	}
	return zap.New(&slogCore{logger: logger.With("component", component), level: level, closing: closing,
		repeats: newRepeatLimiter(repeatWindow, time.Now)})
}

// repeatWindow is how long a message etcd logged is kept from being
// logged again. At start, etcd retries publishing its member in a tight
// loop while it replays its log ("failed to publish local member to
// cluster through raft": a couple of hundred lines in milliseconds).
const repeatWindow = 10 * time.Second

// repeatLimiter passes the first of a message's entries within a window
// and counts the others; the first entry after the window says how many
// were left out.
type repeatLimiter struct {
	mu     sync.Mutex
	window time.Duration
	now    func() time.Time
	seen   map[string]*repeats
}

type repeats struct {
	logged     time.Time
	suppressed int
}

// maxTrackedMessages bounds the limiter's memory: past it, it forgets.
const maxTrackedMessages = 1024

func newRepeatLimiter(window time.Duration, now func() time.Time) *repeatLimiter {
	return &repeatLimiter{window: window, now: now, seen: map[string]*repeats{}}
}

// allow reports whether an entry with msg is to be logged and, if so, how
// many entries with it were left out since the last one logged.
func (l *repeatLimiter) allow(msg string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.seen[msg]
	if r == nil {
		if len(l.seen) >= maxTrackedMessages {
			clear(l.seen)
		}
		l.seen[msg] = &repeats{logged: now}
		return true, 0
	}
	if now.Sub(r.logged) < l.window {
		r.suppressed++
		return false, 0
	}
	n := r.suppressed
	r.logged, r.suppressed = now, 0
	return true, n
}

// benignWarnings are etcd warnings that are expected for an embedded,
// loopback-only member and only clutter the output.
var benignWarnings = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	logger  *slog.Logger
	level   zapcore.Level
	fields  []zapcore.Field
	closing *atomic.Bool
	repeats *repeatLimiter // shared by the cores With derives
}

var _ zapcore.Core = (*slogCore)(nil)

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	n := *c
	n.fields = append(append([]zapcore.Field(nil), c.fields...), fields...)
	return &n
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slogLevel(e.Level)
	if c.closing.Load() || benignWarnings[e.Message] {
		level = slog.LevelDebug
	} else if ok, left := c.repeats.allow(e.Message); !ok {
		return nil
	} else if left > 0 {
		attrs = append(attrs, slog.Int("repeatsNotLogged", left))
	}
	c.logger.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}
