package configs

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// envRef matches ${NAME} and ${NAME:-default}. A bare $ is left alone so
// passwords with dollars survive.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${NAME} with the environment variable NAME and
// ${NAME:-default} with NAME, or default when NAME is unset or empty (the
// shell's meaning). An unset ${NAME} without a default is an error naming
// the variable and the key that holds it: an unset token or certificate
// variable silently read as "" once turned auth and TLS off.
func expandEnv(b []byte) ([]byte, error) {
	if err := checkEnvRefs(b); err != nil {
		return nil, err
	}
	return envRef.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := envRef.FindSubmatch(m)
		v := os.Getenv(string(sub[1]))
		if v == "" && len(sub[2]) > 0 {
			return sub[3]
		}
		return []byte(v)
	}), nil
}

// unsetRef returns the name of the first variable s refers to without a
// default that is not set, or "".
func unsetRef(s []byte) string {
	for _, sub := range envRef.FindAllSubmatch(s, -1) {
		if len(sub[2]) > 0 {
			continue
		}
		if _, ok := os.LookupEnv(string(sub[1])); !ok {
			return string(sub[1])
		}
	}
	return ""
}

func unsetErr(key, name string) error {
	return errorf(key, "environment variable %s is not set (set it, or write ${%s:-default} for an explicit default)", name, name)
}

// checkEnvRefs looks for unset references in the values of the raw
// document, so the error can name their key; comments may mention
// variables freely. A document that only parses once expanded (a
// reference inside a flow mapping, say) is checked line by line instead.
func checkEnvRefs(b []byte) error {
	if unsetRef(b) == "" {
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err == nil {
		return checkEnvNode(&doc, "")
	}
	for i, line := range bytes.Split(b, []byte("\n")) {
		if j := bytes.Index(line, []byte(" #")); j >= 0 {
			line = line[:j]
		}
		if name := unsetRef(line); name != "" {
			return unsetErr("line "+strconv.Itoa(i+1), name)
		}
	}
	return nil
}

func checkEnvNode(n *yaml.Node, key string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkEnvNode(c, key); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if key != "" {
				k = key + "." + k
			}
			if err := checkEnvNode(n.Content[i+1], k); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := checkEnvNode(c, fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if name := unsetRef([]byte(n.Value)); name != "" {
			if key == "" {
				key = "(document)"
			}
			return unsetErr(key, name)
		}
	}
	return nil
}
