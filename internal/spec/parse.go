package spec

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// ParseFile reads and parses one configuration file.
func ParseFile(path string) (*Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(path, data)
}

// Parse reads one configuration within DefaultLimits. filename is used
// only in error messages. On any problem it returns a nil Task and Errors
// listing every problem found, in file order; the returned Task is
// normalized (see Normalize).
func Parse(filename string, data []byte) (*Task, error) {
	return ParseLimits(filename, data, DefaultLimits)
}

// ParseLimits is Parse within the given limits. A file larger than they
// allow, or nested deeper than any configuration needs, is refused before
// it is parsed: parsing costs more than the file's size (quadratic time in
// the depth of flow collections).
func ParseLimits(filename string, data []byte, l Limits) (*Task, error) {
	w := &walker{file: filename, pos: map[string]ast.Node{}, bad: map[string]bool{}, anchors: map[string]ast.Node{}}
	if n := int64(len(data)); n > l.fileBytes() {
		return nil, Errors{{File: filename, Msg: fmt.Sprintf("the file is %d bytes: a configuration may be at most %d (%s; its commands at most %s)",
			n, l.fileBytes(), sizeText(l.fileBytes()), sizeText(l.ScriptBytes))}}
	}
	root, ok := w.document(data)
	if !ok {
		return nil, w.errs
	}
	t := w.task(root)
	if t != nil {
		w.placeProblems(root, t.check(l))
	}
	if len(w.errs) > 0 {
		w.errs.sortByPosition()
		return nil, w.errs
	}
	t.Normalize()
	return t, nil
}

// walker turns a YAML AST into a Task, recording every problem with the
// position of its node.
type walker struct {
	file    string
	errs    Errors
	pos     map[string]ast.Node // field path → value node, to place check() problems
	bad     map[string]bool     // field paths that failed to decode
	anchors map[string]ast.Node
}

// document parses data and returns the body of its only document.
func (w *walker) document(data []byte) (root ast.Node, ok bool) {
	f, err := parseYAML(data)
	if err != nil {
		e := &Error{File: w.file, Line: 1, Col: 1, Msg: "invalid YAML: " + err.Error()}
		var ye yaml.Error
		var de *depthError
		var se *sizeError
		switch {
		case errors.As(err, &de):
			e.Msg = "invalid YAML: " + de.Error()
			e.Line, e.Col = tokenAt(de.tk)
		case errors.As(err, &se):
			e.Msg = se.Error()
			e.Line, e.Col = tokenAt(se.tk)
		case errors.As(err, &ye):
			e.Msg = "invalid YAML: " + ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				e.Line, e.Col = max(tk.Position.Line, 1), max(tk.Position.Column, 1)
			}
		}
		w.errs = append(w.errs, e)
		return nil, false
	}
	var bodies []ast.Node
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			if _, isNull := d.Body.(*ast.NullNode); !isNull {
				bodies = append(bodies, d.Body)
			}
		}
	}
	switch {
	case len(bodies) == 0:
		w.errs = append(w.errs, &Error{File: w.file, Line: 1, Col: 1, Msg: "empty configuration; start with `type: task`"})
		return nil, false
	case len(bodies) > 1:
		w.fail(bodies[1], "", "a file holds one configuration, found %d YAML documents", len(bodies))
		return nil, false
	}
	ast.Walk(anchorCollector(w.anchors), bodies[0])
	return bodies[0], true
}

// parseYAML guards against panics in the YAML parser so that no input can
// crash the server, and refuses a file nested deeper than maxDepth before
// the parser sees it.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed: %v", r)
		}
	}()
	tokens := lexer.Tokenize(string(data))
	if len(tokens) > maxTokens {
		return nil, &sizeError{tokens[maxTokens], len(tokens)}
	}
	if tk := tooDeep(tokens); tk != nil {
		return nil, &depthError{tk}
	}
	return parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
}

// tokenAt is where tk starts, 1-based.
func tokenAt(tk *token.Token) (line, col int) {
	if tk == nil || tk.Position == nil {
		return 1, 1
	}
	return max(tk.Position.Line, 1), max(tk.Position.Column, 1)
}

// depthError is a file nested deeper than maxDepth, at the token that
// went over.
type depthError struct{ tk *token.Token }

func (e *depthError) Error() string {
	return fmt.Sprintf("collections nested more than %d levels deep; no configuration needs as many", maxDepth)
}

// sizeError is a file of more than maxTokens tokens, at the first one over.
type sizeError struct {
	tk *token.Token
	n  int
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%d tokens (keys, values, list items): a configuration may have at most %d; keep long scripts in one block (|)", e.n, maxTokens)
}

// tooDeep finds the first token nested deeper than maxDepth, counting the
// flow collections open ([ and {) and the block collections whose
// indentation is still open (a line's first token, and each "- " of a
// line, opens one at its column and closes those at or right of it). It
// reads tokens, so quotes, comments and block scalars count for nothing.
func tooDeep(tokens token.Tokens) *token.Token {
	var indents []int
	flow, line := 0, 0
	for _, tk := range tokens {
		if tk.Position == nil {
			continue
		}
		first := tk.Position.Line != line
		line = tk.Position.Line
		if flow == 0 && (first || tk.Type == token.SequenceEntryType) {
			col := tk.Position.Column
			for len(indents) > 0 && indents[len(indents)-1] >= col {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, col)
		}
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		}
		if len(indents)+flow > maxDepth {
			return tk
		}
	}
	return nil
}

type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// fail records a problem at node n for the field at path.
func (w *walker) fail(n ast.Node, path, format string, args ...any) {
	line, col := position(n)
	w.errs = append(w.errs, &Error{File: w.file, Line: line, Col: col, Field: path, Msg: fmt.Sprintf(format, args...)})
	w.bad[path] = true
}

// position is where a node starts, 1-based; a block mapping starts at its
// first key.
func position(n ast.Node) (line, col int) {
	switch v := n.(type) {
	case nil:
		return 1, 1
	case *ast.MappingNode:
		if len(v.Values) > 0 && !v.IsFlowStyle {
			return position(v.Values[0])
		}
	case *ast.MappingValueNode:
		return position(v.Key)
	case *ast.DocumentNode:
		return position(v.Body)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 1, 1
	}
	return max(tk.Position.Line, 1), max(tk.Position.Column, 1)
}

// placeProblems turns check() problems into positioned errors, dropping
// those about fields that already failed to decode.
func (w *walker) placeProblems(root ast.Node, ps []problem) {
	for _, p := range ps {
		if w.overlapsBad(p.path) {
			continue
		}
		n := root
		for path := p.path; path != ""; path = parentPath(path) {
			if pn, ok := w.pos[path]; ok {
				n = pn
				break
			}
		}
		w.fail(n, p.path, "%s", p.msg)
	}
}

// overlapsBad reports whether path is, contains or lies within a field that
// failed to decode.
func (w *walker) overlapsBad(path string) bool {
	for b := range w.bad {
		if within(path, b) || within(b, path) {
			return true
		}
	}
	return false
}

// within reports whether path is inner or lies under it.
func within(path, inner string) bool {
	if inner == "" || !strings.HasPrefix(path, inner) {
		return inner == "" && path == ""
	}
	rest := path[len(inner):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// resolve looks through anchors, aliases and tags to the value node.
func (w *walker) resolve(n ast.Node) ast.Node {
	for range 16 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			target, ok := w.anchors[v.Value.GetToken().Value]
			if !ok {
				return v
			}
			n = target
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
	return n
}

type kind int

const (
	kindString kind = iota
	kindInt
	kindFloat
	kindBool
	kindNull
	kindOther // mapping, sequence, unresolved alias
)

// scalar returns the text of a scalar node as written (so 3.10 stays
// "3.10") and its kind.
func (w *walker) scalar(n ast.Node) (string, kind) {
	switch v := w.resolve(n).(type) {
	case nil:
		return "", kindNull
	case *ast.StringNode:
		return v.Value, kindString
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", kindString
		}
		return v.Value.Value, kindString
	case *ast.IntegerNode:
		return v.Token.Value, kindInt
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, kindFloat
	case *ast.BoolNode:
		return v.Token.Value, kindBool
	case *ast.NullNode:
		return "", kindNull
	}
	return "", kindOther
}

func (w *walker) isNull(n ast.Node) bool { _, k := w.scalar(n); return k == kindNull }

// str reads any scalar as text; numbers and booleans keep their spelling.
func (w *walker) str(n ast.Node, path string) (string, bool) {
	s, k := w.scalar(n)
	switch k {
	case kindOther:
		w.fail(n, path, "must be a string, not %s", describe(w.resolve(n)))
		return "", false
	case kindNull:
		w.fail(n, path, "value is missing")
		return "", false
	}
	return s, true
}

// integer reads an integer, written plainly or quoted.
func (w *walker) integer(n ast.Node, path string) (int, bool) {
	const limit = 1 << 31
	switch v := w.resolve(n).(type) {
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			if x > -limit && x < limit {
				return int(x), true
			}
		case uint64:
			if x < limit {
				return int(x), true
			}
		}
		w.fail(n, path, "integer %s is out of range", v.Token.Value)
		return 0, false
	case *ast.StringNode:
		if isDigits(strings.TrimPrefix(v.Value, "-")) {
			x, err := strconv.ParseInt(v.Value, 10, 32)
			if err != nil {
				w.fail(n, path, "integer %s is out of range", v.Value)
				return 0, false
			}
			return int(x), true
		}
	}
	s, k := w.scalar(n)
	w.fail(n, path, "must be an integer, not %s", describeScalar(s, k, w.resolve(n)))
	return 0, false
}

func (w *walker) boolean(n ast.Node, path string) (bool, bool) {
	if b, ok := w.resolve(n).(*ast.BoolNode); ok {
		return b.Value, true
	}
	s, k := w.scalar(n)
	w.fail(n, path, "must be true or false, not %s", describeScalar(s, k, w.resolve(n)))
	return false, false
}

// seq returns the items of a sequence.
func (w *walker) seq(n ast.Node, path, example string) ([]ast.Node, bool) {
	if s, ok := w.resolve(n).(*ast.SequenceNode); ok {
		return s.Values, true
	}
	w.fail(n, path, "must be a list, not %s (e.g. %s)", describe(w.resolve(n)), example)
	return nil, false
}

// strings reads a list of non-null scalars.
func (w *walker) strings(n ast.Node, path, example string) []string {
	items, ok := w.seq(n, path, example)
	if !ok {
		return nil
	}
	out := make([]string, len(items)) // failed items stay empty so indexes match the file
	for i, it := range items {
		w.pos[index(path, i)] = it
		out[i], _ = w.str(it, index(path, i))
	}
	return out
}

// entry is one key of a mapping.
type entry struct {
	key       string
	keyNode   ast.Node
	value     ast.Node
	fieldPath string
}

// mapping returns the entries of a mapping whose keys are in known,
// reporting duplicate and unknown keys. unknown, when not nil, explains an
// unknown key instead of the generic did-you-mean.
func (w *walker) mapping(n ast.Node, path string, known []string, unknown func(key string) string) ([]entry, bool) {
	var values []*ast.MappingValueNode
	switch m := w.resolve(n).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		w.fail(n, path, "must be a mapping of fields, not %s", describe(w.resolve(n)))
		return nil, false
	}
	var out []entry
	first := map[string]ast.Node{}
	for _, mv := range values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			w.fail(mv.Key, path, "YAML merge keys (<<) are not supported; write the fields out")
			continue
		}
		key, k := w.scalar(mv.Key)
		if k == kindOther || k == kindNull {
			w.fail(mv.Key, path, "keys must be plain names")
			continue
		}
		fp := join(path, key)
		if prev, dup := first[key]; dup {
			line, _ := position(prev)
			w.fail(mv.Key, fp, "duplicate key (first set on line %d)", line)
			continue
		}
		first[key] = mv.Key
		if !slices.Contains(known, key) {
			msg := ""
			if unknown != nil {
				msg = unknown(key)
			}
			if msg == "" {
				msg = "unknown field" + didYouMean(key, known)
			}
			w.fail(mv.Key, fp, "%s", msg)
			continue
		}
		w.pos[fp] = mv.Value
		out = append(out, entry{key: key, keyNode: mv.Key, value: mv.Value, fieldPath: fp})
	}
	return out, true
}

// describe names a node's type for messages.
func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode, nil:
		return "an empty value"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.AliasNode:
		return "an unknown alias"
	}
	return "a string"
}

func describeScalar(s string, k kind, n ast.Node) string {
	if k == kindString || k == kindFloat || k == kindBool || k == kindInt {
		return strconv.Quote(s)
	}
	return describe(n)
}

// openDocument checks a configuration file's size (DefaultLimits) and
// reads its YAML document: the walker that reports its problems and the
// root node, or every problem so far.
func openDocument(filename string, data []byte) (*walker, ast.Node, error) {
	w := &walker{file: filename, pos: map[string]ast.Node{}, bad: map[string]bool{}, anchors: map[string]ast.Node{}}
	if n := int64(len(data)); n > DefaultLimits.fileBytes() {
		return nil, nil, Errors{{File: filename, Msg: fmt.Sprintf("the file is %d bytes: a configuration may be at most %d", n, DefaultLimits.fileBytes())}}
	}
	root, ok := w.document(data)
	if !ok {
		return nil, nil, w.errs
	}
	return w, root, nil
}
