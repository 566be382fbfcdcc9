package celenv

import (
	"errors"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
)

// ErrInvalidSelector is wrapped by every error about a selector that
// does not compile, in either environment.
var ErrInvalidSelector = errors.New("invalid selector")

// Bounds of a compile error's text: CEL's own text quotes the offending
// source line, which for a long one-line selector is the whole selector.
const (
	maxReportedIssues   = 3
	maxIssueMessageSize = 256
)

// IssueSummary lists where and why a selector does not compile, without
// quoting its source: at most maxReportedIssues issues, each cut to
// maxIssueMessageSize bytes.
func IssueSummary(iss *cel.Issues) string {
	errs := iss.Errors()
	parts := make([]string, 0, min(len(errs), maxReportedIssues)+1)
	for i, e := range errs {
		if i == maxReportedIssues {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-i))
			break
		}
		msg := e.Message
		if len(msg) > maxIssueMessageSize {
			msg = strings.ToValidUTF8(msg[:maxIssueMessageSize], "") + "..."
		}
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", loc.Line(), loc.Column()+1, msg)
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}
