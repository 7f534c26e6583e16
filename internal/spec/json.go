package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// DecodeJSON reads a configuration sent as JSON (the API's `spec`), as
// strictly as Parse reads YAML: a field the schema does not have, a value
// of the wrong type, or anything after the configuration is refused by
// name, and the Task is normalized and validated within l. Problems carry
// the line and column of the JSON text where there is one, and the field
// path.
func DecodeJSON(data []byte, l Limits) (*Task, error) {
	if n := int64(len(data)); n > l.fileBytes() {
		return nil, Errors{{Msg: fmt.Sprintf("the configuration is %d bytes: at most %d (%s; its commands at most %s)",
			n, l.fileBytes(), sizeText(l.fileBytes()), sizeText(l.ScriptBytes))}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	t := &Task{}
	if err := dec.Decode(t); err != nil {
		return nil, Errors{jsonError(data, err)}
	}
	if end := dec.InputOffset(); len(bytes.TrimSpace(data[end:])) > 0 {
		rest := bytes.TrimLeft(data[end:], " \t\r\n")
		line, col := lineCol(data, int64(len(data)-len(rest)))
		return nil, Errors{{Line: line, Col: col, Msg: "unexpected data after the configuration"}}
	}
	t.Normalize()
	if err := t.ValidateLimits(l); err != nil {
		return nil, err
	}
	return t, nil
}

// jsonError explains why data did not decode into a Task: the unknown
// field, the value of the wrong type, or the syntax error, with its
// position.
func jsonError(data []byte, err error) *Error {
	if path, known := unknownField(data); path != "" {
		_, key := cutLast(path)
		return &Error{Field: path, Msg: "unknown field" + didYouMean(key, known)}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(data, syn.Offset-1) // the byte it stopped at
		return &Error{Line: line, Col: col, Msg: "invalid JSON: " + strings.TrimPrefix(syn.Error(), "json: ")}
	case errors.As(err, &typ):
		line, col := lineCol(data, typ.Offset-1) // the value's last byte
		return &Error{Line: line, Col: col, Field: typ.Field, Msg: fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type), typ.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Msg: "invalid JSON: the configuration ends early"}
	}
	return &Error{Msg: "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonKind names what a Go type reads in JSON.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer (%s)", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

// unknownField finds the first key of data (in key order at each level)
// that Task has no field for, as encoding/json matches them (exactly, else
// ignoring case), and the names that level knows.
func unknownField(data []byte) (path string, known []string) {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return "", nil
	}
	return unknownIn(v, reflect.TypeFor[Task](), "")
}

func unknownIn(v any, t reflect.Type, path string) (string, []string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return "", nil
		}
		for i, it := range x {
			if p, known := unknownIn(it, t.Elem(), index(path, i)); p != "" {
				return p, known
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if t.Kind() == reflect.Map {
			for _, k := range keys {
				if p, known := unknownIn(x[k], t.Elem(), join(path, k)); p != "" {
					return p, known
				}
			}
			return "", nil
		}
		if t.Kind() != reflect.Struct {
			return "", nil
		}
		fields := jsonFields(t)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		for _, k := range keys {
			i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == k })
			if i < 0 {
				i = slices.IndexFunc(fields, func(f jsonField) bool { return strings.EqualFold(f.name, k) })
			}
			if i < 0 {
				return join(path, k), names
			}
			if p, known := unknownIn(x[k], fields[i].typ, join(path, fields[i].name)); p != "" {
				return p, known
			}
		}
	}
	return "", nil
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields are the fields encoding/json reads into a struct of type t.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type})
	}
	return out
}

// cutLast splits "a.b[2].c" into "a.b[2]" and "c".
func cutLast(path string) (parent, key string) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// lineCol is the 1-based line and column of data[off].
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
