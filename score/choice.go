package score

import (
	"regexp"
	"strings"

	"github.com/delegatelab/delegate"
)

var (
	// choiceStatementRE is an explicit answer statement; the last one wins.
	choiceStatementRE = regexp.MustCompile(`(?i:answer\s*(?:is|:)|answer\s+is\s*:|correct\s+(?:answer|option|choice)\s+is|(?:i\s+(?:choose|pick|select))|option\s+is|choice\s+is)\s*:?\s*[*_]*\s*(?:\(\s*([A-Da-d])\s*\)|(?:\\text\{)?([A-D])\b)`)
	choiceParenRE     = regexp.MustCompile(`\(([A-D])\)`)
	choiceLineRE      = regexp.MustCompile(`(?m)^[\s*_]*\(?([A-D])[).:]`)
	// choiceTailRE is a letter closing the response after punctuation.
	// The letter follows a comma, colon or sentence end, as in "Therefore, D.",
	// and does not end a word, as in "vitamin D.".
	choiceTailRE = regexp.MustCompile(`(?:^|[,:]\s*|[.!?]\s+|\n\s*)[*_(]*([A-D])[\s*_).:!]*$`)
	choiceLoneRE = regexp.MustCompile(`^[\s*_(]*([A-Da-d])[\s*_).:]*$`)
)

// Choice verifies a multiple-choice MMLU answer against a reference letter A-D.
// The reference may be written "(B)". The chosen letter is read from the
// first of these that holds one:
//   - a \boxed{C};
//   - the last explicit statement, "the answer is C" or "Answer: D";
//   - a response that is a lone letter;
//   - the last line opening with "B)" or "B.";
//   - the last "(B)";
//   - a capital letter ending the response, as in "Therefore, B.".
func Choice(response, reference string) delegate.Verdict {
	want, ok := choiceLetter(reference)
	res := extractChoice(response)
	if !res.Found || !ok {
		return res
	}
	res.Correct = res.Extracted == want
	return res
}

// choiceLetter reads a reference letter such as "B", "(B)" or "b".
func choiceLetter(s string) (string, bool) {
	m := choiceLoneRE.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return strings.ToUpper(m[1]), true
}

func extractChoice(response string) delegate.Verdict {
	if b, ok := delegate.Boxed(response); ok {
		if l, ok := choiceLetter(textMathStrip(b)); ok {
			return delegate.Verdict{Found: true, Extracted: l, Method: "boxed"}
		}
	}
	if ms := choiceStatementRE.FindAllStringSubmatch(response, -1); len(ms) > 0 {
		m := ms[len(ms)-1]
		return delegate.Verdict{Found: true, Extracted: strings.ToUpper(m[1] + m[2]), Method: "answer is"}
	}
	if l, ok := choiceLetter(response); ok {
		return delegate.Verdict{Found: true, Extracted: l, Method: "lone letter"}
	}
	if ms := choiceLineRE.FindAllStringSubmatch(response, -1); len(ms) > 0 {
		return delegate.Verdict{Found: true, Extracted: ms[len(ms)-1][1], Method: "line letter"}
	}
	if ms := choiceParenRE.FindAllStringSubmatch(response, -1); len(ms) > 0 {
		return delegate.Verdict{Found: true, Extracted: ms[len(ms)-1][1], Method: "letter"}
	}
	if m := choiceTailRE.FindStringSubmatch(response); m != nil {
		return delegate.Verdict{Found: true, Extracted: m[1], Method: "final letter"}
	}
	return delegate.Verdict{}
}

// textMathStrip removes \text{} wrappers and blanks from a boxed answer.
func textMathStrip(s string) string {
	return strings.TrimSpace(mathTextRE.ReplaceAllString(s, "$1"))
}
