package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// column is one column of a `get` table. Priority 0 columns always show;
// priority 1 only with -o wide.
type column struct {
	name     string
	typ      string
	priority int32
	format   string
}

// wantsTable reports whether the client asked for a meta.k8s.io Table, as
// kubectl get does.
func wantsTable(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "as=Table")
}

func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, k *kind, objs []runtime.Object, rv, cont string) {
	data, err := s.tableJSON(r, k, objs, rv, cont, true)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeRawJSON(w, http.StatusOK, data)
}

// tableJSON renders objects as a Table. Rows carry the object, or only its
// metadata unless includeObject=Object.
func (s *Server) tableJSON(r *http.Request, k *kind, objs []runtime.Object, rv, cont string, withColumns bool) ([]byte, error) {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}}
	t.ResourceVersion, t.Continue = rv, cont
	cols, rowFn := k.tableSpec()
	if withColumns || true {
		for _, c := range cols {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{
				Name: c.name, Type: c.typ, Format: c.format, Priority: c.priority,
			})
		}
	}
	full := r.URL.Query().Get("includeObject") == "Object"
	for _, obj := range objs {
		row := metav1.TableRow{Cells: rowFn(obj)}
		if full {
			row.Object = runtime.RawExtension{Object: obj}
		} else if acc, err := meta.Accessor(obj); err == nil {
			pom := &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: *objectMetaOf(acc),
			}
			row.Object = runtime.RawExtension{Object: pom}
		}
		t.Rows = append(t.Rows, row)
	}
	if t.Rows == nil {
		t.Rows = []metav1.TableRow{}
	}
	return json.Marshal(t)
}

func objectMetaOf(acc metav1.Object) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{
		Name: acc.GetName(), Namespace: acc.GetNamespace(), UID: acc.GetUID(),
		ResourceVersion: acc.GetResourceVersion(), CreationTimestamp: acc.GetCreationTimestamp(),
		DeletionTimestamp: acc.GetDeletionTimestamp(), Labels: acc.GetLabels(),
		Annotations: acc.GetAnnotations(), OwnerReferences: acc.GetOwnerReferences(),
		Finalizers: acc.GetFinalizers(), GenerateName: acc.GetGenerateName(), Generation: acc.GetGeneration(),
	}
}

func (k *kind) tableSpec() ([]column, func(runtime.Object) []any) {
	if k.row != nil {
		return k.columns, k.row
	}
	return ageColumns, ageRow
}

var nameCol = column{name: "Name", typ: "string", format: "name"}
var ageCol = column{name: "Age", typ: "string"}

var ageColumns = []column{nameCol, ageCol}

func ageRow(obj runtime.Object) []any {
	acc, _ := meta.Accessor(obj)
	return []any{acc.GetName(), age(acc)}
}

func age(acc metav1.Object) string {
	ts := acc.GetCreationTimestamp()
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.Time))
}

func ageSince(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
