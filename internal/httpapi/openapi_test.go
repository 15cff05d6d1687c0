package httpapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/etcdpool/etcdpool/coordinator"
)

// openAPIDoc is the part of the OpenAPI document the test checks.
type openAPIDoc struct {
	OpenAPI string                                 `json:"openapi"`
	Paths   map[string]map[string]openAPIOp        `json:"paths"`
	Comps   struct{ Schemas map[string]schemaDoc } `json:"components"`
}

type openAPIOp struct {
	Operation  string                     `json:"x-etcdpool-operation"`
	Parameters []openAPIParam             `json:"parameters"`
	Responses  map[string]json.RawMessage `json:"responses"`
}

type openAPIParam struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

type schemaDoc struct {
	Properties map[string]struct {
		Enum []string `json:"enum"`
	} `json:"properties"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// The document lists exactly the routes the server serves, each with the
// operation the server checks and its path parameters.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[string]openAPIOp{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = op
		}
	}
	served := map[string]route{"GET /v1/openapi.json": {}}
	for _, rt := range (&Server{}).table() {
		served[rt.pattern] = rt
	}
	if got, want := sortedKeys(documented), sortedKeys(served); !slices.Equal(got, want) {
		t.Fatalf("openapi.json documents\n  %v\nthe server serves\n  %v", got, want)
	}
	params := regexp.MustCompile(`\{(\w+)\}`)
	for pattern, rt := range served {
		op := documented[pattern]
		if string(rt.op) != op.Operation {
			t.Errorf("%s: documented operation %q, the server checks %q", pattern, op.Operation, rt.op)
		}
		for _, m := range params.FindAllStringSubmatch(pattern, -1) {
			if !slices.ContainsFunc(op.Parameters, func(p openAPIParam) bool { return p.Name == m[1] && p.In == "path" }) {
				t.Errorf("%s: path parameter %s is not documented", pattern, m[1])
			}
		}
		if rt.op != "" && (op.Responses["401"] == nil || op.Responses["403"] == nil) {
			t.Errorf("%s: 401 and 403 are not documented", pattern)
		}
	}
}

// The document's schemas have exactly the fields of the Go types the
// handlers read and write, and every error code.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	types := map[string]any{
		"Error": ErrorBody{}, "SessionRequest": sessionRequest{}, "Session": SessionView{}, "KeepAlive": KeepAliveView{},
		"ClaimRequest": claimRequest{}, "Claim": ClaimView{}, "Loss": LossView{}, "ForceReleaseRequest": forceReleaseRequest{},
		"PoolSpec": coordinator.PoolSpec{}, "PoolStatus": coordinator.PoolStatus{}, "Seat": SeatView{}, "Waiter": WaiterView{},
		"Instance": InstanceView{}, "Event": coordinator.Event{},
	}
	if got, want := sortedKeys(doc.Comps.Schemas), sortedKeys(types); !slices.Equal(got, want) {
		t.Fatalf("schemas %v, want %v", got, want)
	}
	for name, v := range types {
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			if tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		sort.Strings(fields)
		if got := sortedKeys(doc.Comps.Schemas[name].Properties); !slices.Equal(got, fields) {
			t.Errorf("schema %s has %v, the Go type %T has %v", name, got, v, fields)
		}
	}
	codes := doc.Comps.Schemas["Error"].Properties["code"].Enum
	for _, err := range []error{&coordinator.NoSeatError{}, ErrInvalidInput, ErrUnauthenticated, ErrForbidden, coordinator.ErrNotHeld,
		ErrNotFound, ErrWaitTimeout, coordinator.ErrConflict, ErrSessionGone, coordinator.ErrStaleToken, coordinator.ErrClosed, errors.New("other")} {
		if _, b := statusOf(err); !slices.Contains(codes, b.Code) {
			t.Errorf("error code %q (of %v) is not in the document's enum %v", b.Code, err, codes)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
