package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Doc is a policy file's text held as a YAML document, for edits that
// leave the rest as it was written: comments, order, flow or block style.
// (Marshalling File again would drop the comments and reorder the keys.)
// Paths are key names from the top: "projects", "ml", "limits", "jobs".
type Doc struct {
	name string
	file *ast.File
}

// ParseDoc reads a policy file's text for editing. It checks only that
// the text is YAML; Parse checks that it is a policy.
func ParseDoc(name string, data []byte) (*Doc, error) {
	f, err := parser.ParseBytes(data, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Doc{name: name, file: f}, nil
}

// Bytes is the document's text.
func (d *Doc) Bytes() []byte {
	s := d.file.String()
	if s = strings.TrimRight(s, "\n"); s == "" {
		return nil
	}
	return []byte(s + "\n")
}

func (d *Doc) root() *ast.MappingNode {
	if len(d.file.Docs) == 0 {
		return nil
	}
	m, _ := d.file.Docs[0].Body.(*ast.MappingNode)
	return m
}

// lookup finds the entry at path: its mapping and index there.
func (d *Doc) lookup(path []string) (*ast.MappingNode, int) {
	m := d.root()
	for i, key := range path {
		if m == nil {
			return nil, -1
		}
		k := index(m, key)
		if k < 0 {
			return nil, -1
		}
		if i == len(path)-1 {
			return m, k
		}
		m, _ = m.Values[k].Value.(*ast.MappingNode)
	}
	return nil, -1
}

func index(m *ast.MappingNode, key string) int {
	for i, v := range m.Values {
		if keyText(v) == key {
			return i
		}
	}
	return -1
}

func keyText(v *ast.MappingValueNode) string {
	if s, ok := v.Key.(*ast.StringNode); ok {
		return s.Value
	}
	return v.Key.GetToken().Value
}

// Has reports whether the document has an entry at path.
func (d *Doc) Has(path ...string) bool {
	_, k := d.lookup(path)
	return k >= 0
}

// Keys are the keys of the mapping at path, in the file's order.
func (d *Doc) Keys(path ...string) []string {
	m := d.root()
	if len(path) > 0 {
		pm, k := d.lookup(path)
		if k < 0 {
			return nil
		}
		m, _ = pm.Values[k].Value.(*ast.MappingNode)
	}
	if m == nil {
		return nil
	}
	out := make([]string, len(m.Values))
	for i, v := range m.Values {
		out[i] = keyText(v)
	}
	return out
}

// Delete removes the entry at path (its comments go with it) and reports
// whether there was one. A mapping it leaves empty stays, as {}.
func (d *Doc) Delete(path ...string) bool {
	m, k := d.lookup(path)
	if k < 0 {
		return false
	}
	m.Values = append(m.Values[:k], m.Values[k+1:]...)
	if len(m.Values) == 0 && len(path) > 1 {
		// An empty block mapping prints badly: write the parent's entry
		// again as `key: {}`.
		d.Set("{}", path[:len(path)-1]...)
		return true
	}
	return d.reparse() == nil
}

// Set writes value, YAML text of a scalar or a flow collection ("4",
// "2d", "[normal]", "{}"), at path, creating the mappings on the way. An
// entry already there keeps its place and its comments. An error says an
// entry on the way is not a mapping.
func (d *Doc) Set(value string, path ...string) error {
	if len(path) == 0 {
		return fmt.Errorf("policy: edit: empty path")
	}
	m := d.root()
	if m == nil {
		// No mapping at the top (an empty file, or comments only): the new
		// entry goes after whatever text there is.
		text := strings.TrimRight(string(d.Bytes()), "\n")
		if text != "" {
			text += "\n"
		}
		f, err := parser.ParseBytes([]byte(text+snippet(path, value, 0, false)), parser.ParseComments)
		if err != nil {
			return fmt.Errorf("policy: edit: %w", err)
		}
		d.file = f
		return nil
	}
	for i, key := range path {
		k := index(m, key)
		rest := path[i:]
		if k < 0 {
			mv, err := parseEntry(snippet(rest, value, column(m), m.IsFlowStyle))
			if err != nil {
				return err
			}
			m.Values = append(m.Values, mv)
			return d.reparse()
		}
		old := m.Values[k]
		if i == len(path)-1 {
			mv, err := parseEntry(snippet(rest, value, old.Key.GetToken().Position.Column-1, m.IsFlowStyle))
			if err != nil {
				return err
			}
			mv.Comment, mv.FootComment = old.Comment, old.FootComment
			if c := old.Value.GetComment(); c != nil {
				_ = mv.Value.SetComment(c)
			}
			m.Values[k] = mv
			return d.reparse()
		}
		switch v := old.Value.(type) {
		case *ast.MappingNode:
			m = v
		case *ast.NullNode:
			// `key:` with nothing under it: write the entry anew.
			mv, err := parseEntry(snippet(rest, value, old.Key.GetToken().Position.Column-1, m.IsFlowStyle))
			if err != nil {
				return err
			}
			mv.Comment = old.Comment
			m.Values[k] = mv
			return d.reparse()
		default:
			return fmt.Errorf("policy: edit: %s: %s is not a mapping", d.name, strings.Join(path[:i+1], "."))
		}
	}
	return nil
}

// reparse prints the document and reads it again, so that positions (and
// so indentation) are the text's own after an edit.
func (d *Doc) reparse() error {
	f, err := parser.ParseBytes(d.Bytes(), parser.ParseComments)
	if err != nil {
		return fmt.Errorf("policy: edit: %s: %w", d.name, err)
	}
	d.file = f
	return nil
}

// column is where the keys of mapping m start (0-based).
func column(m *ast.MappingNode) int {
	if len(m.Values) == 0 {
		return m.GetToken().Position.Column - 1
	}
	return m.Values[0].Key.GetToken().Position.Column - 1
}

// snippet is the YAML text of path: value, indented by indent spaces,
// nested in block style (or in flow style, to go inside a flow mapping).
func snippet(path []string, value string, indent int, flow bool) string {
	if flow {
		s := value
		for i := len(path) - 1; i > 0; i-- {
			s = "{" + quoteKey(path[i]) + ": " + s + "}"
		}
		return strings.Repeat(" ", indent) + quoteKey(path[0]) + ": " + s + "\n"
	}
	var b strings.Builder
	for i, key := range path {
		b.WriteString(strings.Repeat(" ", indent+2*i) + quoteKey(key) + ":")
		if i == len(path)-1 {
			b.WriteString(" " + value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func parseEntry(text string) (*ast.MappingValueNode, error) {
	f, err := parser.ParseBytes([]byte(text), parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("policy: edit: %q: %w", text, err)
	}
	if m, ok := f.Docs[0].Body.(*ast.MappingNode); ok && len(m.Values) == 1 {
		return m.Values[0], nil
	}
	if mv, ok := f.Docs[0].Body.(*ast.MappingValueNode); ok {
		return mv, nil
	}
	return nil, fmt.Errorf("policy: edit: %q is not one entry", text)
}

var plainKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@/-]*$`) })

// quoteKey writes a name as a YAML key: plain where it can be.
func quoteKey(s string) string {
	if plainKey().MatchString(s) && !reserved[strings.ToLower(s)] {
		return s
	}
	return strconv.Quote(s)
}

var reserved = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "null": true, "y": true, "n": true, "~": true}

// Scalar writes s as a YAML scalar value: plain where it reads back as the
// same string, quoted otherwise.
func Scalar(s string) string {
	if plainKey().MatchString(s) && !reserved[strings.ToLower(s)] {
		return s
	}
	return strconv.Quote(s)
}
