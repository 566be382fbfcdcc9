package logs

import (
	"fmt"
	"io"
	"os"
)

// tailChunk is how much of a file tailOffset reads at a time, backwards.
const tailChunk = 32 << 10

// tailOffset returns the offset in f (of size size) where its last n lines
// begin. A final newline ends the last line rather than starting an empty
// one.
func tailOffset(f *os.File, size int64, n int64) (int64, error) {
	if n <= 0 {
		return size, nil
	}
	buf := make([]byte, tailChunk)
	end := size
	seen := int64(0)
	first := true
	for end > 0 {
		start := max(end-tailChunk, 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, fmt.Errorf("read log: %w", err)
		}
		if first && len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			chunk = chunk[:len(chunk)-1] // the terminator of the last line
		}
		first = false
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			seen++
			if seen == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// limitWriter writes at most n bytes to w, then reports done.
type limitWriter struct {
	w io.Writer
	n int64 // < 0: no limit
}

func (l *limitWriter) done() bool { return l.n == 0 }

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n < 0 {
		return l.w.Write(p)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	return n, err
}
