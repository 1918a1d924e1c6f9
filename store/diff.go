package store

import (
	"encoding/json"
	"fmt"
	"sort"
)

// DiffJSON compares two JSON documents leaf by leaf and describes each
// difference as `key: old there, new now`, keys sorted.
func DiffJSON(old, now []byte) ([]string, error) {
	var a, b any
	if err := json.Unmarshal(old, &a); err != nil {
		return nil, fmt.Errorf("decode recorded settings: %w", err)
	}
	if err := json.Unmarshal(now, &b); err != nil {
		return nil, fmt.Errorf("decode settings: %w", err)
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		x, okx := fa[k]
		y, oky := fb[k]
		switch {
		case !okx:
			out = append(out, fmt.Sprintf("%s: absent there, %s now", k, y))
		case !oky:
			out = append(out, fmt.Sprintf("%s: %s there, absent now", k, x))
		case x != y:
			out = append(out, fmt.Sprintf("%s: %s there, %s now", k, x, y))
		}
	}
	return out, nil
}

// flatten writes every leaf of v under its dotted key path.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
		for k, c := range x {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, c, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
		}
		for i, c := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), c, out)
		}
	default:
		b, _ := json.Marshal(x) // a decoded JSON value always encodes
		out[prefix] = string(b)
	}
}
