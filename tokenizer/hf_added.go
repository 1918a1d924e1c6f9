package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// addedMatcher finds added tokens in text, as the tokenizers library's Aho-Corasick matcher does.
// It takes the leftmost first, and the longest of those starting at the
// same place.
type addedMatcher struct {
	tokens []AddedToken
	first  [256]bool
	nodes  []trieNode
}

type trieNode struct {
	next map[byte]int32
	tok  int32 // index in tokens, -1 if no token ends here
}

func newAddedMatcher(tokens []AddedToken) *addedMatcher {
	m := &addedMatcher{tokens: tokens, nodes: []trieNode{{tok: -1}}}
	// Sorting makes the trie independent of the file's order; equal
	// contents keep the first token.
	sort.SliceStable(m.tokens, func(i, j int) bool { return m.tokens[i].Content < m.tokens[j].Content })
	for i, a := range m.tokens {
		m.first[a.Content[0]] = true
		n := int32(0)
		for k := 0; k < len(a.Content); k++ {
			c := a.Content[k]
			nx, ok := m.nodes[n].next[c]
			if !ok {
				if m.nodes[n].next == nil {
					m.nodes[n].next = map[byte]int32{}
				}
				nx = int32(len(m.nodes))
				m.nodes = append(m.nodes, trieNode{tok: -1})
				m.nodes[n].next[c] = nx
			}
			n = nx
		}
		if m.nodes[n].tok < 0 {
			m.nodes[n].tok = int32(i)
		}
	}
	return m
}

// longest returns the index of the longest token starting at s[i:] and its
// end, or -1.
func (m *addedMatcher) longest(s string, i int) (tok, end int) {
	tok, n := -1, int32(0)
	for k := i; k < len(s); k++ {
		nx, ok := m.nodes[n].next[s[k]]
		if !ok {
			break
		}
		n = nx
		if m.nodes[n].tok >= 0 {
			tok, end = int(m.nodes[n].tok), k+1
		}
	}
	return tok, end
}

// split calls emit for each piece of s in order.
// A piece is a run of text with id -1, or an added token with its id.
// Whitespace absorbed by lstrip or rstrip belongs to the token.
func (m *addedMatcher) split(s string, emit func(seg string, id int)) {
	if len(m.tokens) == 0 {
		if s != "" {
			emit(s, -1)
		}
		return
	}
	last := 0 // end of what was emitted
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		k, end := m.longest(s, i)
		if k < 0 {
			i++
			continue
		}
		a := m.tokens[k]
		start := i
		if a.LStrip {
			for start > last {
				r, n := utf8.DecodeLastRuneInString(s[last:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= n
			}
		}
		if a.RStrip {
			for end < len(s) {
				r, n := utf8.DecodeRuneInString(s[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += n
			}
		}
		if start > last {
			emit(s[last:start], -1)
		}
		emit(s[start:end], a.ID)
		last, i = end, end
	}
	if last < len(s) {
		emit(s[last:], -1)
	}
}
