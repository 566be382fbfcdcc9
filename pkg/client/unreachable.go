package client

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Unreachable reports whether err says a request did not reach a serving
// API server: the connection was refused, reset or lost, or the server
// answered 503 (starting, or its storage not ready). Such a request may
// be sent again as it was; nothing was changed by it.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServiceUnavailable(err) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Retry intervals of RetryWhileUnreachable: from UnreachableRetryMin,
// doubling, at most UnreachableRetryMax (each with up to 20 % jitter).
const (
	UnreachableRetryMin = 100 * time.Millisecond
	UnreachableRetryMax = time.Second
)

// RetryWhileUnreachable calls f until it returns a result or an error
// that is not Unreachable, or ctx ends (then it returns f's last error).
// Between tries it waits from UnreachableRetryMin, doubling, up to
// UnreachableRetryMax; onRetry (may be nil) is called before each wait.
//
// Informers list and watch through it (ListWatch): client-go's reflector
// backs off exponentially on these errors, to 30 s and more (its back-off
// resets only every two minutes), and sleeps that long after the server
// is back, so after an API server restart controllers would resume only
// tens of seconds later. Retrying here, at most a second apart, the
// reflector never sees the outage: its list or watch call simply returns
// once the server answers again.
func RetryWhileUnreachable[T any](ctx context.Context, f func() (T, error), onRetry func(error)) (T, error) {
	wait := UnreachableRetryMin
	for {
		v, err := f()
		if !Unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		if onRetry != nil {
			onRetry(err)
		}
		d := wait + time.Duration(rand.Int64N(int64(wait)/5+1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, UnreachableRetryMax)
	}
}
