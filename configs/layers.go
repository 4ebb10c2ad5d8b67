package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// A configuration is built in layers, each on top of the one before:
// the built-in defaults, a base document (--dev's settings), the file,
// then the environment, one variable per key: ROOMCELL_ and the key's
// dotted path in capitals with "_" for "." (presence.stale_after is
// ROOMCELL_PRESENCE_STALE_AFTER; a list is comma-separated). The command
// line's flags come last (cmd/roomcell). Every layer goes through the same
// checks as a file, and an error from the environment names its variable.

// EnvPrefix starts every environment variable roomcell reads as config.
const EnvPrefix = "ROOMCELL_"

// EnvName is the environment variable of the config key path.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

var yamlUnmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// EnvKeys lists the key paths the environment can set: every scalar and
// every list of scalars of Config, sorted. Lists of blocks and maps
// (gifts, store.room_dbs) are file-only.
func EnvKeys() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == durationType || reflect.PointerTo(t).Implements(yamlUnmarshaler):
			out = append(out, path)
		case t.Kind() == reflect.Struct:
			for name, ft := range yamlFields(t) {
				p := name
				if path != "" {
					p = path + "." + name
				}
				walk(ft, p)
			}
		case t.Kind() == reflect.Slice:
			if scalarKind(t.Elem()) {
				out = append(out, path)
			}
		case t.Kind() == reflect.Map:
		default:
			out = append(out, path)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	slices.Sort(out)
	return out
}

func scalarKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface, reflect.Pointer:
		return t == durationType
	}
	return true
}

// Layers are the inputs of Build besides the defaults.
type Layers struct {
	// Base is a YAML document under the file (--dev's settings).
	Base []byte
	// File is the configuration file's content; nil = none.
	File []byte
	// Env looks an environment variable up (os.LookupEnv); nil = none.
	Env func(string) (string, bool)
}

// Build makes the configuration from the defaults and l's layers, and
// validates it.
func Build(l Layers) (Config, error) {
	c, err := Assemble(l)
	if err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Assemble is Build without the validation, for a caller that lays more
// on top (the command line's flags) and validates the result.
func Assemble(l Layers) (Config, error) {
	merged := &yaml.Node{Kind: yaml.MappingNode}
	var seedDoc *yaml.Node
	for _, layer := range [][]byte{l.Base, l.File} {
		if layer == nil {
			continue
		}
		doc, err := parseLayer(layer)
		if err != nil {
			return Config{}, err
		}
		if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
			if doc.Content[0].Kind == yaml.MappingNode {
				mergeNode(merged, deref(doc.Content[0]))
			}
			seedDoc = doc
		}
	}
	if l.Env != nil {
		if err := overlayEnv(merged, l.Env); err != nil {
			return Config{}, err
		}
	}
	var f file
	if len(merged.Content) > 0 {
		b, err := yaml.Marshal(merged)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
	c := f.Config
	// Seed 003's top-level keys come from the file alone (the base and
	// the environment use the nested shape).
	if seedDoc != nil {
		if err := applySeedShape(seedDoc, &c); err != nil {
			return Config{}, err
		}
	}
	c.setDefaults()
	return c, nil
}

// parseLayer expands ${VAR} references and checks one document the way a
// file is checked, so its errors keep their lines.
func parseLayer(b []byte) (*yaml.Node, error) {
	b, err := expandEnv(b)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := checkDocument(&doc, reflect.TypeOf(file{})); err != nil {
		return nil, err
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, withPath(&doc, err)
	}
	if err := checkSeedShape(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// deref copies n with every alias replaced by what it names, so the
// merged document needs no anchors.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = deref(k)
	}
	return &c
}

// mergeNode lays src's keys over dst's: blocks merge key by key, a
// scalar or a list replaces what was there.
func mergeNode(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		if k.Value == "<<" {
			if v.Kind == yaml.MappingNode {
				mergeNode(dst, v)
			}
			continue
		}
		j := mappingIndex(dst, k.Value)
		switch {
		case j >= 0 && v.Kind == yaml.MappingNode && dst.Content[j+1].Kind == yaml.MappingNode:
			mergeNode(dst.Content[j+1], v)
		case j >= 0:
			dst.Content[j+1] = v
		default:
			dst.Content = append(dst.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k.Value}, v)
		}
	}
}

func mappingIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// overlayEnv sets each key whose variable env holds.
func overlayEnv(merged *yaml.Node, env func(string) (string, bool)) error {
	types := map[string]reflect.Type{}
	for _, p := range EnvKeys() {
		types[p] = keyType(p)
	}
	for _, path := range EnvKeys() {
		name := EnvName(path)
		v, ok := env(name)
		if !ok {
			continue
		}
		val := scalar(v)
		if t := types[path]; t.Kind() == reflect.Slice && t != durationType {
			val = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					val.Content = append(val.Content, scalar(item))
				}
			}
		} else if v == "" {
			val.Tag, val.Style = "!!str", yaml.DoubleQuotedStyle
		}
		// The variable alone, checked as a file would be, so its error
		// names it.
		one := &yaml.Node{Kind: yaml.MappingNode}
		setPath(one, path, val)
		if err := checkNode(one, reflect.TypeOf(file{}), ""); err != nil {
			var ce *Error
			if errors.As(err, &ce) {
				return errorf(ce.Key, "%s (from environment variable %s)", strings.TrimSuffix(ce.Msg, " (line 0)"), name)
			}
			return fmt.Errorf("%w (from environment variable %s)", err, name)
		}
		if err := decodeStrict(one, &file{}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		setPath(merged, path, val)
	}
	return nil
}

// scalar is a plain YAML scalar with the tag a file's would resolve to
// ("30s" a string, "9" an int, "true" a bool).
func scalar(v string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: v}
	n.Tag = n.ShortTag()
	return n
}

// keyType is the Go type of the key at path.
func keyType(path string) reflect.Type {
	t := reflect.TypeOf(Config{})
	for _, part := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		t = yamlFields(t)[part]
	}
	return t
}

// setPath puts val at the dotted path under mapping m, making the blocks
// on the way.
func setPath(m *yaml.Node, path string, val *yaml.Node) {
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		j := mappingIndex(m, part)
		if j < 0 || m.Content[j+1].Kind != yaml.MappingNode {
			next := &yaml.Node{Kind: yaml.MappingNode}
			if j < 0 {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: part}, next)
			} else {
				m.Content[j+1] = next
			}
			m = next
			continue
		}
		m = m.Content[j+1]
	}
	last := parts[len(parts)-1]
	if j := mappingIndex(m, last); j >= 0 {
		m.Content[j+1] = val
		return
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: last}, val)
}
