package local

import (
	"slices"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/tokenizer"
)

// FuzzContentStream checks that contentStream hands out a prefix of the final content.
// It feeds the tokens a model could sample in arbitrary batches. They end
// as the engine ends a generation: at the first <|end|> or </s>, or after a
// stop sequence, which is then cut. The final content is what
// ParseAssistant finds in the final tokens.
func FuzzContentStream(f *testing.F) {
	f.Add([]byte("hello ab world"), []byte{3, 1}, "ab")
	f.Add([]byte("caf\xc3\xa9\xff\x00tool"), []byte{1}, "\xc3\xa9")
	f.Add([]byte("x\x01y\x02z"), []byte{2, 2, 2}, "")
	f.Fuzz(func(t *testing.T, raw []byte, cuts []byte, stop string) {
		// Each input byte is a token: most are text bytes, a few specials.
		toks := make([]int, len(raw))
		for i, b := range raw {
			switch b {
			case 0x01:
				toks[i] = tokenizer.ToolCall
			case 0x02:
				toks[i] = tokenizer.EndToolCall
			case 0x04:
				toks[i] = tokenizer.End
			case 0x05:
				toks[i] = tokenizer.FirstReserve
			default:
				toks[i] = tokenizer.ByteOffset + int(b)
			}
		}
		var stops []string
		var stopSeq []int
		if stop != "" {
			stops = []string{stop}
			stopSeq = tokenizer.Encode(stop)
		}
		// End the generation as the engine does.
		end, stopLen := len(toks), 0
		for i, id := range toks {
			if id == tokenizer.End {
				end, stopLen = i+1, 1
				break
			}
			if stopSeq != nil && i+1 >= len(stopSeq) && slices.Equal(toks[i+1-len(stopSeq):i+1], stopSeq) {
				end, stopLen = i+1, len(stopSeq)
				break
			}
		}
		gen := toks[:end]
		msg, _ := tokenizer.ParseAssistant(gen[:len(gen)-stopLen])

		c := contentStream{stops: stops, codec: builtin{}}
		var got strings.Builder
		for at, k := 0, 0; at < len(gen); k++ {
			n := len(gen) - at
			if k < len(cuts) {
				n = min(n, int(cuts[k])+1)
			}
			got.WriteString(c.add(gen[at : at+n]))
			at += n
		}
		if !strings.HasPrefix(msg.Content, got.String()) {
			t.Fatalf("streamed %q is not a prefix of the content %q (tokens %v, stop %q)", got.String(), msg.Content, gen, stop)
		}
	})
}
