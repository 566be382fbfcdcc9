package client

import (
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"

	"allot.dev/allot/api/scheme"
)

// The client decodes every response and watch event with Kubernetes' JSON
// serializer, which first finds the object's kind (MetaFactory.Interpret)
// and then decodes the object. The default Interpret unmarshals the whole
// document with encoding/json to read two top-level fields, about a third
// of the cost of a decode; a watch event pays it twice (the envelope, then
// the object). topLevelMeta reads the two fields with a plain scan of the
// top level instead, and leaves anything unusual to the default.

// topLevelMeta is a json.MetaFactory that finds apiVersion and kind by
// scanning the top level of the document.
type topLevelMeta struct{}

// Interpret returns the group, version and kind of data, as
// json.DefaultMetaFactory does: keys match case-insensitively and the last
// one wins. Escapes in keys or in those two values, non-ASCII keys, null
// values and malformed documents are handed to json.DefaultMetaFactory,
// which gives the same answer or the error.
func (topLevelMeta) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	apiVersion, kind, ok := scanTypeMeta(data)
	if !ok {
		return json.DefaultMetaFactory.Interpret(data)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// scanTypeMeta reads the top-level "apiVersion" and "kind" strings of a
// JSON object; ok is false when the document is not simple enough to be
// sure (see Interpret).
func scanTypeMeta(data []byte) (apiVersion, kind string, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", "", false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return "", "", skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return "", "", false
		}
		key, end, plain := readString(data, i)
		if !plain || end < 0 {
			return "", "", false
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return "", "", false
		}
		i = skipSpace(data, i+1)
		isVersion, isKind := strings.EqualFold(key, "apiVersion"), strings.EqualFold(key, "kind")
		if isVersion || isKind {
			if i >= len(data) || data[i] != '"' {
				return "", "", false // null, a number...: let encoding/json decide
			}
			v, end, plain := readString(data, i)
			if !plain || end < 0 {
				return "", "", false
			}
			if isVersion {
				apiVersion = v
			} else {
				kind = v
			}
			i = end
		} else if i = skipValue(data, i); i < 0 {
			return "", "", false
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return "", "", false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return apiVersion, kind, skipSpace(data, i+1) == len(data)
		default:
			return "", "", false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	return i
}

// readString reads the string whose opening quote is at data[i]. It
// returns its text and the index after the closing quote (-1 when there is
// none); plain is false when the string holds an escape or a byte outside
// printable ASCII, whose meaning is left to encoding/json.
func readString(data []byte, i int) (s string, end int, plain bool) {
	end, plain = stringEnd(data, i)
	if end < 0 {
		return "", -1, false
	}
	return string(data[i+1 : end-1]), end, plain
}

// stringEnd is readString without the text, which it does not allocate:
// skipValue passes over every string nested in the values it skips.
func stringEnd(data []byte, i int) (end int, plain bool) {
	plain = true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return j + 1, plain
		case c == '\\':
			plain = false
			j++
		case c < 0x20 || c >= 0x80:
			plain = false
		}
	}
	return -1, false
}

// skipValue returns the index after the value that starts at data[i], or
// -1 when it is malformed as far as this scan can tell.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end, _ := stringEnd(data, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _ := stringEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' &&
			data[j] != ' ' && data[j] != '\n' && data[j] != '\t' && data[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// clientSerializer is scheme.Codecs without conversion, as client-go's
// typed clients use it, with the JSON serializers built on topLevelMeta.
type clientSerializer struct {
	infos []runtime.SerializerInfo
}

func newClientSerializer() clientSerializer {
	base := scheme.Codecs.WithoutConversion()
	mk := func(pretty, strict bool) *json.Serializer {
		return json.NewSerializerWithOptions(topLevelMeta{}, scheme.Scheme, scheme.Scheme,
			json.SerializerOptions{Pretty: pretty, Strict: strict})
	}
	var infos []runtime.SerializerInfo
	for _, info := range base.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			info.Serializer = typedSerializer{mk(false, false)}
			info.PrettySerializer = mk(true, false)
			info.StrictSerializer = mk(false, true)
			if info.StreamSerializer != nil {
				stream := *info.StreamSerializer
				stream.Serializer = mk(false, false)
				info.StreamSerializer = &stream
			}
		}
		infos = append(infos, info)
	}
	return clientSerializer{infos: infos}
}

func (s clientSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

// typedSerializer is the JSON serializer with a fast path for the common
// decode: a response into a typed API object of the response's own kind
// (a created pod into a *Pod, a list into a *PodList). That one is decoded
// with encoding/json's v2 engine, about twice as fast as the v1 engine
// with half the allocations (see watchDecoder). Everything else (no
// target, unstructured targets, a Status where an object was expected, a
// document without its kind) goes through the serializer itself, as does
// a document the v2 engine refuses.
type typedSerializer struct{ *json.Serializer }

// Decode implements runtime.Decoder.
func (s typedSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil || defaults != nil {
		return s.Serializer.Decode(data, defaults, into)
	}
	switch into.(type) {
	case runtime.Unstructured, *runtime.Unknown:
		return s.Serializer.Decode(data, defaults, into)
	}
	if actual, ok := decodeTyped(data, into); ok {
		return into, actual, nil
	}
	return s.Serializer.Decode(data, defaults, into)
}

// decodeTyped decodes data into the typed object into with encoding/json's
// v2 engine and opts when data is a document of into's own kind, and
// returns that kind. ok is false, and into is left zero, when data is of
// another kind, has none, or is refused by the v2 engine: the caller then
// decodes it with the general serializer.
func decodeTyped(data []byte, into runtime.Object, opts ...jsonv2.Options) (_ *schema.GroupVersionKind, ok bool) {
	kinds, _, err := scheme.Scheme.ObjectKinds(into)
	if err != nil {
		return nil, false
	}
	actual, err := topLevelMeta{}.Interpret(data)
	if err != nil || actual.Kind == "" || actual.Version == "" || !slices.Contains(kinds, *actual) {
		return nil, false
	}
	if err := jsonv2.Unmarshal(data, into, opts...); err != nil {
		reflect.ValueOf(into).Elem().SetZero()
		return nil, false
	}
	return actual, true
}

func (s clientSerializer) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return runtime.WithVersionEncoder{Version: gv, Encoder: e, ObjectTyper: scheme.Scheme}
}

func (s clientSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return runtime.WithoutVersionDecoder{Decoder: d}
}

var _ runtime.NegotiatedSerializer = clientSerializer{}

// codecs is what the client's REST clients negotiate with.
var codecs = newClientSerializer()
