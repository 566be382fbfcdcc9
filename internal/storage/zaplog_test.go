package storage

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcd's repeated warnings (a couple of hundred "failed to publish local
// member" lines in milliseconds at every start) are logged once per
// window, then once more with the count of those left out.
func TestZapLoggerLimitsRepeats(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	core := &slogCore{logger: slog.New(slog.NewTextHandler(&buf, nil)), level: zapcore.WarnLevel, closing: new(atomic.Bool),
		repeats: newRepeatLimiter(10*time.Second, func() time.Time { return now })}
	log := zap.New(core).With(zap.String("member", "m1"))
	for range 183 {
		log.Warn("failed to publish local member to cluster through raft", zap.Error(errTooMany))
	}
	log.Warn("another warning")
	if got := strings.Count(buf.String(), "failed to publish"); got != 1 {
		t.Fatalf("%d lines of a repeated warning within the window, want 1:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "another warning") {
		t.Fatalf("a different warning was held back:\n%s", buf.String())
	}
	now = now.Add(11 * time.Second)
	log.Warn("failed to publish local member to cluster through raft", zap.Error(errTooMany))
	if !strings.Contains(buf.String(), "repeatsNotLogged=182") {
		t.Fatalf("the warning after the window does not count the ones left out:\n%s", buf.String())
	}
}

var errTooMany = errorString("etcdserver: too many requests")

type errorString string

func (e errorString) Error() string { return string(e) }
