package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// LogWriteOutages makes the clients built from rc log when the API server
// starts refusing writes for want of storage (507 Insufficient Storage:
// etcd's disk or quota is full, reads still served) and when a write
// succeeds again: one line per change, however many requests fail in
// between, so a component retrying with back-off says why it is stuck
// without flooding its log. Call it before building clients from rc.
func LogWriteOutages(rc *rest.Config, logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	w := &outageLog{logger: logger}
	prev := rc.WrapTransport
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &outageTransport{next: rt, log: w}
	}
}

// outageLog remembers whether writes were last refused; shared by every
// transport of one rest.Config.
type outageLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	down   bool
	reason string
}

func (l *outageLog) refused(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down && l.reason == reason {
		return
	}
	if !l.down {
		l.logger.Error("the API server refuses writes: its storage has no space; retrying with back-off until it takes them again (reads still work)", "reason", reason)
	} else {
		l.logger.Error("the API server still refuses writes, for another reason", "reason", reason)
	}
	l.down, l.reason = true, reason
}

func (l *outageLog) accepted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		l.logger.Info("the API server takes writes again")
		l.down, l.reason = false, ""
	}
}

type outageTransport struct {
	next http.RoundTripper
	log  *outageLog
}

// maxStatusBytes bounds what is read of a 507 answer to find its message.
const maxStatusBytes = 64 << 10

func (t *outageTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return res, err
	}
	switch {
	case res.StatusCode == http.StatusInsufficientStorage:
		body, rerr := io.ReadAll(io.LimitReader(res.Body, maxStatusBytes))
		rest := res.Body
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), rest), rest}
		reason := http.StatusText(res.StatusCode)
		var st metav1.Status
		if rerr == nil && json.Unmarshal(body, &st) == nil && st.Message != "" {
			reason = st.Message
		}
		t.log.refused(reason)
	case res.StatusCode < 300 && req.Method != http.MethodGet && req.Method != http.MethodHead:
		t.log.accepted()
	}
	return res, nil
}

// IsInsufficientStorage reports whether err is the API server's 507: its
// storage has no space, writes are refused and reads served. A component
// that retries such a write can log it at debug level: LogWriteOutages
// logs the condition once.
func IsInsufficientStorage(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code == http.StatusInsufficientStorage
}
