package apiserver

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/storage"
)

// Leaving managedFields out of lists and watches, for clients that ask.
//
// allot's own components never read metadata.managedFields (pkg/client's
// WithoutManagedFields skips them as it decodes), and they are most of a
// stored pod's bytes. A list or watch with OmitManagedFieldsParam=true gets
// the objects in their stored version without them: the member is cut
// out of the stored bytes as they are written into the response
// (writeWithRVOmit), nothing is decoded or encoded again. Every other
// request, and every other form (views of the other version, Table,
// PartialObjectMetadata, get), is served as it is without the parameter;
// a client that asks still skips what it is sent. The parameter is read
// on list and watch only, so it cannot reach what a write stores.

// OmitManagedFieldsParam is the query parameter of a list or watch asking
// for the objects without metadata.managedFields ("true"). It is allot's:
// Kubernetes has none, and a request without it gets what kube-apiserver
// would send.
const OmitManagedFieldsParam = "omitManagedFields"

// wantsManagedFieldsOmitted reports whether a list or watch asks to leave
// managedFields out.
func wantsManagedFieldsOmitted(r *http.Request) bool {
	return isTrue(r.URL.Query().Get(OmitManagedFieldsParam))
}

var managedFieldsKey = []byte(`"managedFields"`)

// managedFieldsSpan finds the top-level metadata's managedFields member in
// stored JSON and returns the bytes to cut: the member and the comma
// before it, or after it when it is metadata's first member. ok is false
// when there is none, or when stored is not the JSON its scan expects
// (then it is sent as it is).
func managedFieldsSpan(stored []byte) (from, to int, ok bool) {
	i := rvAt(stored)
	if i < 0 {
		return 0, 0, false
	}
	comma := -1 // the comma before the member at i, if any
	for {
		i = skipSpace(stored, i)
		if i >= len(stored) || stored[i] != '"' {
			return 0, 0, false // '}' (the end of metadata) or not JSON
		}
		start := i
		i = skipString(stored, i)
		if i < 0 {
			return 0, 0, false
		}
		isMF := bytes.Equal(stored[start:i], managedFieldsKey)
		i = skipSpace(stored, i)
		if i >= len(stored) || stored[i] != ':' {
			return 0, 0, false
		}
		end := skipValue(stored, skipSpace(stored, i+1))
		if end < 0 {
			return 0, 0, false
		}
		next := skipSpace(stored, end)
		if next >= len(stored) {
			return 0, 0, false
		}
		if isMF {
			switch {
			case comma >= 0:
				return comma, end, true
			case stored[next] == ',':
				return start, next + 1, true
			case stored[next] == '}':
				return start, end, true
			}
			return 0, 0, false
		}
		if stored[next] != ',' {
			return 0, 0, false
		}
		comma, i = next, next+1
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a
// quote), or -1 when it does not end.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i], or
// -1 when it does not end. It checks nesting and strings only, which is
// all it needs to find the end of a value this server encoded.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			if i = skipString(b, i); i < 0 || depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\n', '\t', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}

// writeWithRVOmit is writeWithRV with metadata.managedFields left out:
// the bytes of span (the watch cache's record, see mfSpan), else of
// managedFieldsSpan's scan.
func writeWithRVOmit(buf *bytes.Buffer, stored []byte, rev int64, span storage.Span) {
	from, to, ok := int(span.From), int(span.To), span != storage.Span{}
	if !ok {
		from, to, ok = managedFieldsSpan(stored)
	}
	at := rvAt(stored)
	if !ok || at < 0 || from < at || to <= from || to > len(stored) {
		writeWithRV(buf, stored, rev)
		return
	}
	buf.Write(stored[:at])
	buf.WriteString(rvPrefix)
	var num [20]byte
	buf.Write(strconv.AppendInt(num[:0], rev, 10))
	buf.WriteByte('"')
	next := at
	if from == at {
		next = to
	}
	if next < len(stored) && stored[next] != '}' {
		buf.WriteByte(',')
	}
	buf.Write(stored[at:from])
	buf.Write(stored[to:])
}

// mfSpan records where the top-level metadata's managedFields member is
// while the watch cache decodes a stored value (decoderFor): a decode
// skips the value anyway, so the record costs no second scan. Reused
// through mfSpans; opts are the cache's decode options (cacheJSON's) with
// the record.
type mfSpan struct {
	span storage.Span
	opts jsonv2.Options
}

var mfSpans = sync.Pool{New: func() any {
	m := &mfSpan{}
	m.opts = jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(unmarshalTime,
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *[]metav1.ManagedFieldsEntry) error {
			*v = nil
			return m.skip(dec)
		})))
	return m
}}

// skip skips the value of a managedFields member, and records its
// offsets when it is the top-level metadata's (one level below the
// top-level object; the first such, the only one in valid JSON).
func (m *mfSpan) skip(dec *jsontext.Decoder) error {
	depth, v0 := dec.StackDepth(), int(dec.InputOffset())
	if err := dec.SkipValue(); err != nil {
		return err
	}
	if depth != 2 || m.span != (storage.Span{}) {
		return nil
	}
	m.span = storage.Span{From: int32(v0), To: int32(dec.InputOffset())}
	return nil
}

// mfOffsets records the offsets of the managedFields value it is decoded
// from, skipping it (lightPod's; the name just before it).
type mfOffsets struct{ v0, v1 int }

func (m *mfOffsets) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	m.v0 = int(dec.InputOffset())
	err := dec.SkipValue()
	m.v1 = int(dec.InputOffset())
	return err
}

// decodeRecording runs decode with the options of a recording mfSpan, and
// returns what it decoded with the span of the managedFields member in
// stored (the zero Span when there is none).
func decodeRecording(stored []byte, decode func(opts jsonv2.Options) (storage.Decoded, error)) (storage.Decoded, error) {
	m := mfSpans.Get().(*mfSpan)
	defer mfSpans.Put(m)
	m.span = storage.Span{}
	d, err := decode(m.opts)
	if err != nil {
		return d, err
	}
	d.Omit = memberSpan(stored, int(m.span.From), int(m.span.To))
	return d, nil
}

// memberSpan turns the offsets of a managedFields value (from just after
// its name, to its end) into the member's bytes to cut, with one comma;
// the zero Span when the bytes are not `"managedFields":` and a value.
func memberSpan(stored []byte, v0, v1 int) storage.Span {
	if v1 <= v0 || v1 > len(stored) || v0 < len(managedFieldsKey) {
		return storage.Span{}
	}
	key := v0 - len(managedFieldsKey)
	switch {
	case stored[v0] == ':': // the offset is just after the name
	case stored[v0-1] == ':': // or just after the colon
		key--
	default:
		return storage.Span{}
	}
	if key < 1 || !bytes.Equal(stored[key:key+len(managedFieldsKey)], managedFieldsKey) || stored[key+len(managedFieldsKey)] != ':' {
		return storage.Span{}
	}
	switch {
	case stored[key-1] == ',':
		return storage.Span{From: int32(key - 1), To: int32(v1)}
	case v1 < len(stored) && stored[v1] == ',':
		return storage.Span{From: int32(key), To: int32(v1 + 1)}
	case v1 < len(stored) && stored[v1] == '}':
		return storage.Span{From: int32(key), To: int32(v1)}
	}
	return storage.Span{}
}
