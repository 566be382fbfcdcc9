package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// pollControl applies the control file's unhealthy set when it changes
// (so a SIGUSR1 flip lasts until the file is edited).
func pollControl(ctx context.Context, p *plugin, path string, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last map[string]bool
	for {
		ids, err := readControl(path)
		if err != nil {
			log.Warn("read control file", "err", err)
		} else if last == nil || !mapsEqual(ids, last) {
			p.setUnhealthy(ids)
			last = ids
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// readControl reads the IDs listed in the control file, one per line;
// blank lines and lines starting with # are ignored, and a missing file
// lists none.
func readControl(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if id := strings.TrimSpace(line); id != "" && !strings.HasPrefix(id, "#") {
			ids[id] = true
		}
	}
	return ids, nil
}
