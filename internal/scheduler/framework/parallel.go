package framework

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
)

// parallelize calls fn(i) for i in [0, pieces) on at most workers
// goroutines, handing out work in chunks, as client-go's
// workqueue.ParallelizeUntil does. It stops handing out work once ctx
// ends. With one worker (or one piece) it runs on the caller's goroutine.
func parallelize(ctx context.Context, workers, pieces int, fn func(i int)) {
	parallelizeUntil(ctx, workers, pieces, nil, fn)
}

// parallelizeUntil is parallelize that also stops handing out work once
// stop (when not nil) is set. The pieces done are always a prefix of
// [0, pieces): chunks are handed out in order and finish once started.
func parallelizeUntil(ctx context.Context, workers, pieces int, stop *atomic.Bool, fn func(i int)) {
	if pieces <= 0 {
		return
	}
	stopped := func() bool { return ctx.Err() != nil || (stop != nil && stop.Load()) }
	if workers <= 1 || pieces == 1 {
		for i := 0; i < pieces && !stopped(); i++ {
			fn(i)
		}
		return
	}
	chunk := chunkSize(pieces, workers)
	chunks := (pieces + chunk - 1) / chunk
	workers = min(workers, chunks)
	var next atomic.Int64
	work := func() {
		for !stopped() {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			end := min((c+1)*chunk, pieces)
			for i := c * chunk; i < end; i++ {
				fn(i)
			}
		}
	}
	// The caller is one of the workers: on a busy machine, a cycle then
	// does not wait for every worker goroutine to be scheduled.
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// chunkSize balances per-chunk overhead against load balance: about
// sqrt(pieces), but no more than an even share per worker.
func chunkSize(pieces, workers int) int {
	s := int(math.Sqrt(float64(pieces)))
	if r := pieces/workers + 1; r < s {
		s = r
	}
	return max(s, 1)
}
