package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// watchTable prints the current table, then one row per change until ctx
// ends. Rows line up with the first table's columns.
func (o *getOptions) watchTable(ctx context.Context, s *session, r getRequest) error {
	if len(r.names) > 1 {
		return errors.New("-w watches at most one name")
	}
	q := o.query(s, r.mapping)
	if len(r.names) == 1 {
		q.fieldSelector = joinSelectors(q.fieldSelector, "metadata.name="+r.names[0])
	}
	t, err := s.getTable(ctx, r.mapping, q, "")
	if err != nil {
		return err
	}
	v := o.view(r.mapping, false)
	al := &aligner{w: s.out}
	rows := v.rows(t)
	if !o.noHeaders {
		rows = append([][]string{v.header(t)}, rows...)
	}
	al.print(rows)
	rv := t.ResourceVersion
	for {
		next, err := o.streamRows(ctx, s, r, q, rv, v, al)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		rv = next
	}
}

// watchEvent is one line of a watch stream whose objects are Tables.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// streamRows follows one watch request from rv and returns the last
// resourceVersion seen when the server ends it.
func (o *getOptions) streamRows(ctx context.Context, s *session, r getRequest, q listQuery, rv string, v tableView, al *aligner) (string, error) {
	req := s.c.RESTClient(corev1.SchemeGroupVersion).Get().AbsPath(resourcePath(r.mapping, q.ns, "")).
		SetHeader("Accept", tableAccept).Param("watch", "true").Param("resourceVersion", rv)
	stream, err := withSelectors(req, q).Stream(ctx)
	if err != nil {
		return rv, err
	}
	defer stream.Close()
	dec := json.NewDecoder(stream)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return rv, nil
			}
			return rv, fmt.Errorf("read watch of %s: %w", r.mapping.Resource.Resource, err)
		}
		switch ev.Type {
		case "ERROR":
			var st metav1.Status
			if err := json.Unmarshal(ev.Object, &st); err != nil {
				return rv, fmt.Errorf("decode watch error: %w", err)
			}
			return rv, &apierrors.StatusError{ErrStatus: st}
		case "BOOKMARK":
			continue
		}
		var t metav1.Table
		if err := json.Unmarshal(ev.Object, &t); err != nil {
			return rv, fmt.Errorf("decode watch table: %w", err)
		}
		for _, row := range t.Rows {
			if m := rowMeta(row); m.ResourceVersion != "" {
				rv = m.ResourceVersion
			}
		}
		al.print(v.rows(&t))
	}
}

func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
