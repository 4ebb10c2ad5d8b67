package configs

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The YAML decoder's own errors name Go types and lines
// ("field poll_intervall not found in type configs.OutboxWorkerConfig",
// "cannot unmarshal !!int `5` into time.Duration"). checkDocument walks
// the document against the Go types first and words the common mistakes
// for the person editing the file: the key's dotted path, its line, the
// nearest known key, and that a duration needs a unit. Anything it does not
// recognise is left to the decoder, whose message gets the path of the key
// on the line it names (withPath).

var durationType = reflect.TypeOf(time.Duration(0))

// checkDocument checks every key and scalar of doc against t (the file's
// Go type).
func checkDocument(doc *yaml.Node, t reflect.Type) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return checkNode(doc.Content[0], t, "")
}

func checkNode(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return nil
	}
	switch {
	case t == durationType:
		return checkDuration(n, path)
	case n.Kind == yaml.ScalarNode:
		return checkScalar(n, t, path)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // the decoder says what it wanted
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its mapping's keys are this one's
				if err := checkNode(v, t, path); err != nil {
					return err
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				return unknownKey(join(path, k.Value), k, fields)
			}
			if err := checkNode(v, ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, e := range n.Content {
			if err := checkNode(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDuration: a bare number is the common slip ("poll_interval: 5"):
// the decoder would call it an int it cannot put into time.Duration.
func checkDuration(n *yaml.Node, path string) error {
	if n.Kind != yaml.ScalarNode {
		return errorf(path, "want a duration such as 5s, 500ms or 2m (line %d)", n.Line)
	}
	switch n.Tag {
	case "!!int", "!!float":
		return errorf(path, "%s has no unit: a duration needs one, e.g. %ss or %sms (line %d)", n.Value, n.Value, n.Value, n.Line)
	}
	if _, err := time.ParseDuration(n.Value); err != nil {
		return errorf(path, "%q is not a duration: want a number with a unit, e.g. 5s, 500ms or 2m (line %d)", n.Value, n.Line)
	}
	return nil
}

// checkScalar words a value of the wrong kind for the key it is under.
func checkScalar(n *yaml.Node, t reflect.Type, path string) error {
	var want string
	switch t.Kind() {
	case reflect.Bool:
		if n.Tag != "!!bool" {
			want = "true or false"
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Tag != "!!int" {
			want = "a whole number"
		}
	case reflect.Float32, reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			want = "a number"
		}
	case reflect.Struct, reflect.Map:
		want = "a mapping of keys (indented lines below the key)"
	case reflect.Slice:
		want = "a list"
	}
	if want == "" {
		return nil
	}
	return errorf(path, "%q is not %s (line %d)", n.Value, want, n.Line)
}

func unknownKey(path string, k *yaml.Node, fields map[string]reflect.Type) error {
	known := make([]string, 0, len(fields))
	for name := range fields {
		known = append(known, name)
	}
	slices.Sort(known)
	if near := nearest(k.Value, known); near != "" {
		return errorf(path, "unknown key (line %d); did you mean %s?", k.Line, near)
	}
	return errorf(path, "unknown key (line %d); known keys here: %s", k.Line, strings.Join(known, ", "))
}

// yamlFields maps the YAML keys of struct t to their types, inline
// structs' keys included, as yaml.v3 reads them.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// nearest returns the known key closest to key by edit distance, when it
// is close enough to be a slip (a third of the key's length, at least 2).
func nearest(key string, known []string) string {
	best, bestD := "", max(2, len(key)/3)+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// withPath adds, to a decoder error naming a line, the dotted path of the
// key on that line: "config: outbox_worker.batch_size: line 7: cannot
// unmarshal ...".
func withPath(doc *yaml.Node, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0] // the first mistake, as the checks above report
	}
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("config: %s", msg)
	}
	line, _ := strconv.Atoi(m[1])
	if p := pathAtLine(doc, line, ""); p != "" {
		return fmt.Errorf("config: %s: %s", p, msg)
	}
	return fmt.Errorf("config: %s", msg)
}

func pathAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p := pathAtLine(c, line, path); p != "" {
				return p
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Line == line || v.Line == line && v.Kind == yaml.ScalarNode {
				return join(path, k.Value)
			}
			if p := pathAtLine(v, line, join(path, k.Value)); p != "" {
				return p
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if c.Kind == yaml.ScalarNode && c.Line == line {
				return fmt.Sprintf("%s[%d]", path, i)
			}
			if p := pathAtLine(c, line, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}
