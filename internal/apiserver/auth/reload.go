package auth

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Run reloads the tokens file whenever it changes, until ctx ends. It watches
// the file's directory rather than the file, because editors and atomic
// writers replace the file by rename, and a watch on the old inode would go
// quiet. When the directory cannot be watched it polls the file's mtime and
// size every second instead. Call Run at most once.
func (a *TokenAuthenticator) Run(ctx context.Context) {
	w, err := a.newWatcher()
	if err != nil {
		a.logger.Warn("watch tokens file; polling instead", "err", err)
		a.poll(ctx)
		return
	}
	defer func() {
		if err := w.Close(); err != nil {
			a.logger.Warn("close tokens file watcher", "err", err)
		}
	}()
	// The file may have changed between NewTokenAuthenticator and the watch.
	a.reload()
	if !a.watch(ctx, w) {
		a.logger.Warn("tokens file watcher stopped; polling instead")
		a.poll(ctx)
	}
}

func (a *TokenAuthenticator) newWatcher() (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Dir(a.path)); err != nil {
		if cerr := w.Close(); cerr != nil {
			a.logger.Warn("close tokens file watcher", "err", cerr)
		}
		return nil, err
	}
	return w, nil
}

// watch reloads after each burst of events in the directory. Any event
// counts, not only those naming the file, so that symlink swaps (as in
// mounted secrets) are seen too; reload ignores unchanged content. It
// returns false if the watcher closed before ctx ended.
func (a *TokenAuthenticator) watch(ctx context.Context, w *fsnotify.Watcher) bool {
	timer := time.NewTimer(a.debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case _, ok := <-w.Events:
			if !ok {
				return false
			}
			timer.Reset(a.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return false
			}
			// Events may have been lost (queue overflow): check the file.
			a.logger.Warn("watch tokens file", "err", err)
			timer.Reset(a.debounce)
		case <-timer.C:
			a.reload()
		}
	}
}

// fileStamp is what polling compares to notice a change.
type fileStamp struct {
	modNanos int64
	size     int64
	err      string
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{err: err.Error()}
	}
	return fileStamp{modNanos: fi.ModTime().UnixNano(), size: fi.Size()}
}

// poll reloads the file whenever its mtime, size or stat error changes.
func (a *TokenAuthenticator) poll(ctx context.Context) {
	last := stampOf(a.path)
	a.reload()
	t := time.NewTicker(a.pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s := stampOf(a.path); s != last {
				last = s
				a.reload()
			}
		}
	}
}
