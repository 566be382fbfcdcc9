package framework

import (
	"errors"
	"fmt"
	"strings"
)

// Code is the outcome of one plugin call. Plugins never answer with a
// bool: every "no" says which kind of no it is, so the queue knows what to
// wait for and `allot explain` can say why.
type Code int

// Codes, from best to worst.
const (
	// Success: the plugin is satisfied (a nil *Status means Success).
	Success Code = iota
	// Unschedulable: the pod does not fit the node now, but may after the
	// cluster changes (pods leave, the node grows). Post-filter plugins may
	// try to make room.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod cannot fit the node however
	// other pods move (wrong labels, untolerated taint); post-filter
	// plugins cannot help on that node.
	UnschedulableAndUnresolvable
	// Wait: the pod waits for something outside the scheduler (a claim not
	// created yet, a driver still allocating). It is neither a fit failure
	// nor an error: the pod is parked without backoff until an event that
	// a plugin registered arrives.
	Wait
	// Error: the plugin failed (a bug, a timeout). The pod is retried with
	// backoff; the error is never reported as "does not fit".
	Error
	// Skip: returned by a PreFilter plugin, it tells the framework to skip
	// the same plugin's Filter for this pod (nothing to check).
	Skip
)

var codeNames = [...]string{"Success", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Error", "Skip"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Status is a plugin's answer: a code, the reasons (short, node-independent
// phrases that are counted across nodes in the unschedulable message, such
// as "Insufficient cpu"), an optional node-specific detail for people
// ("requested 2, free 1 of 4"), the plugin that gave it, and for Error the
// error. A nil *Status is Success. A Status is immutable once returned.
type Status struct {
	code    Code
	reasons []string
	detail  string
	plugin  string
	err     error
}

// NewStatus returns a status with a code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an error as an Error status; nil gives nil (Success).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether s is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether s says the pod does not fit (Unschedulable or
// UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the status's reasons. The slice is shared: do not modify.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Detail returns the node-specific explanation, possibly empty.
func (s *Status) Detail() string {
	if s == nil {
		return ""
	}
	return s.detail
}

// Plugin returns the name of the plugin that gave the status.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// Err returns the error of an Error status, else nil.
func (s *Status) Err() error {
	if s == nil || s.code != Error {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// WithDetail returns a copy of s with a node-specific explanation.
func (s *Status) WithDetail(format string, args ...any) *Status {
	if s == nil {
		return nil
	}
	cp := *s
	cp.detail = fmt.Sprintf(format, args...)
	return &cp
}

// WithPlugin returns a copy of s attributed to plugin. The framework sets
// it on every status a plugin returns; plugins need not.
func (s *Status) WithPlugin(plugin string) *Status {
	if s == nil {
		return nil
	}
	cp := *s
	cp.plugin = plugin
	return &cp
}

// Message joins the reasons, and the detail when there is one.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	msg := strings.Join(s.reasons, ", ")
	if s.detail != "" {
		if msg != "" {
			msg += ": "
		}
		msg += s.detail
	}
	return msg
}

// String is "Code(plugin): message" for logs.
func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	p := ""
	if s.plugin != "" {
		p = "(" + s.plugin + ")"
	}
	return fmt.Sprintf("%s%s: %s", s.code, p, s.Message())
}
