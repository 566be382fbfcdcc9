package pods

import "time"

// nextBackoff is the delay before the next restart of a container whose
// previous delay was prev (0: none yet) and whose last attempt ran for
// ran. The delay starts at initial and doubles up to max; an attempt that
// ran for at least twice max (ten minutes with the defaults, as in the
// kubelet) proves the container healthy and starts the sequence over.
func nextBackoff(prev, ran, initial, max time.Duration) time.Duration {
	if ran >= 2*max {
		prev = 0
	}
	d := initial
	if prev > 0 {
		d = 2 * prev
	}
	if d > max {
		d = max
	}
	return d
}
