package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// argSpec is everything derived once from an argument struct: its input schema (as
// JSON, so every Schema call hands out a fresh, unshared map) and the property names
// the decoder knows, with their JSON type names and whether they are required.
//
// The struct is the single source of both: a field tagged `json:"name"` is a required
// property, `json:"name,omitempty"` an optional one, and the `jsonschema:"…"` tag is
// its description — the same rules jsonschema.For applies, so the schema the model
// sees and the decoder that judges its calls cannot disagree.
type argSpec struct {
	schemaJSON []byte
	fields     map[string]argField // by JSON name
	order      []string            // JSON names in field order
}

type argField struct {
	jsonType string // "string", "boolean", "integer"
	required bool
}

// tweak adjusts a generated property schema (bounds the generator cannot infer).
type tweak func(props map[string]*jsonschema.Schema)

// minimum sets a lower bound on an integer property.
func minimum(name string, v float64) tweak {
	return func(props map[string]*jsonschema.Schema) { props[name].Minimum = &v }
}

// maximum sets an upper bound on an integer property.
func maximum(name string, v float64) tweak {
	return func(props map[string]*jsonschema.Schema) { props[name].Maximum = &v }
}

// minLength sets a minimum length on a string property.
func minLength(name string, n int) tweak {
	return func(props map[string]*jsonschema.Schema) { props[name].MinLength = &n }
}

// enum restricts a string property to values.
func enum(name string, values ...string) tweak {
	return func(props map[string]*jsonschema.Schema) {
		props[name].Enum = nil
		for _, v := range values {
			props[name].Enum = append(props[name].Enum, v)
		}
	}
}

// items bounds the length of an array property (and makes it non-nullable: the
// generator allows null for a Go slice, the decoder does not).
func items(name string, lo, hi int) tweak {
	return func(props map[string]*jsonschema.Schema) {
		props[name].Type, props[name].Types = "array", nil
		props[name].MinItems, props[name].MaxItems = &lo, &hi
	}
}

// describe replaces a property's description (one that states configured values).
func describe(name, text string) tweak {
	return func(props map[string]*jsonschema.Schema) { props[name].Description = text }
}

// newArgSpec builds the argSpec of the argument struct T. It panics on a struct the
// generator rejects: argument structs are fixed at compile time, and the package's
// tests build every one of them.
func newArgSpec[T any](tweaks ...tweak) *argSpec {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema for %T: %v", *new(T), err))
	}
	if s.Properties == nil {
		// An argument-less tool still says "an object with no properties".
		s.Properties = map[string]*jsonschema.Schema{}
	}
	for _, tw := range tweaks {
		tw(s.Properties)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: marshal schema for %T: %v", *new(T), err))
	}
	spec := &argSpec{schemaJSON: b, fields: map[string]argField{}}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		tag, ok := f.Tag.Lookup("json")
		if !ok || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		spec.fields[name] = argField{jsonType: jsonTypeOf(f.Type.Kind()), required: !strings.Contains(opts, "omitempty")}
		spec.order = append(spec.order, name)
	}
	return spec
}

func jsonTypeOf(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Slice:
		return "array"
	default:
		panic(fmt.Sprintf("tools: unsupported argument kind %s", k))
	}
}

// schema returns a fresh copy of the input schema as a plain JSON object.
func (a *argSpec) schema() map[string]any {
	var m map[string]any
	if err := json.Unmarshal(a.schemaJSON, &m); err != nil {
		panic(fmt.Sprintf("tools: schema round trip: %v", err)) // we marshalled it ourselves
	}
	return m
}

// errArgs marks a bad-arguments error; its text is the one-line reason.
var errArgs = errors.New("invalid arguments")

func argErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errArgs, fmt.Sprintf(format, a...))
}

// decode parses raw into dst (a pointer to the argument struct of a). The checks run
// in a fixed order so that one bad call always gets the same reason:
//
//  1. raw is one JSON object (empty input counts as {}), and nothing follows it;
//  2. every key is a known property (unknown fields are rejected, not ignored);
//  3. no value is null, and every required property is present;
//  4. every value has its property's type (json.Decoder with DisallowUnknownFields).
//
// Value checks (empty strings, non-positive timeouts) belong to each tool; the
// returned set names the keys the call gave, so that a tool can tell an explicit zero
// from an absent optional field.
func (a *argSpec) decode(raw []byte, dst any) (given map[string]bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil { // rejects trailing data too
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) || bytes.Equal(raw, []byte("null")) {
			return nil, argErr("arguments must be a JSON object")
		}
		return nil, argErr("malformed JSON: %s", oneLine(strings.TrimPrefix(err.Error(), "json: ")))
	}
	if obj == nil {
		return nil, argErr("arguments must be a JSON object")
	}
	var unknown []string
	for k := range obj {
		if _, ok := a.fields[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, argErr("unknown field %s", quoteName(unknown[0]))
	}
	for _, name := range a.order {
		f := a.fields[name]
		v, present := obj[name]
		switch {
		case present && bytes.Equal(bytes.TrimSpace(v), []byte("null")):
			return nil, argErr("%s must be %s %s, not null", name, article(f.jsonType), f.jsonType)
		case !present && f.required:
			return nil, argErr("missing required field %s", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			if f, ok := a.fields[ute.Field]; ok {
				return nil, argErr("%s must be %s %s", ute.Field, article(f.jsonType), f.jsonType)
			}
		}
		return nil, argErr("%s", oneLine(strings.TrimPrefix(err.Error(), "json: ")))
	}
	given = make(map[string]bool, len(obj))
	for k := range obj {
		given[k] = true
	}
	return given, nil
}

func article(jsonType string) string {
	if jsonType == "integer" || jsonType == "array" {
		return "an"
	}
	return "a"
}

// quoteName quotes a model-supplied key for an error line, bounded and on one line.
func quoteName(s string) string { return fmt.Sprintf("%q", truncate(s, 64)) }

// without returns a copy of a without the named properties: absent from the schema
// and unknown to the decoder (a call that still sends one is rejected as an unknown
// field), so that an option leaving a parameter out changes both at once.
func (a *argSpec) without(names ...string) *argSpec {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	m := a.schema()
	if props, ok := m["properties"].(map[string]any); ok {
		for n := range drop {
			delete(props, n)
		}
	}
	if req, ok := m["required"].([]any); ok {
		kept := req[:0]
		for _, r := range req {
			if s, _ := r.(string); !drop[s] {
				kept = append(kept, r)
			}
		}
		m["required"] = kept
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("tools: marshal schema: %v", err)) // it was JSON a moment ago
	}
	out := &argSpec{schemaJSON: b, fields: map[string]argField{}}
	for _, n := range a.order {
		if !drop[n] {
			out.fields[n] = a.fields[n]
			out.order = append(out.order, n)
		}
	}
	return out
}
