package dataset

import (
	"bytes"
	_ "embed"
	"fmt"

	"github.com/delegatelab/delegate"
)

// builtinJSONL holds our own open-ended requests, one {"id","kind","prompt"} a line.
// The kinds are explanation, planning, comparison, writing, analysis and
// code design.
//
//go:embed open.jsonl
var builtinJSONL []byte

// builtinTestEvery puts every fourth request in file order into the test part.
// Of 40 requests, 30 train and 10 test, with each kind in both parts.
const builtinTestEvery = 4

// Builtin returns the built-in open-ended requests (Dataset "open"),
// split deterministically into disjoint train and test parts. Each call
// returns fresh slices.
func Builtin() (train, test []delegate.Task) {
	l := &loader{file: "open.jsonl", rep: &Report{}}
	all, err := l.open(bytes.NewReader(builtinJSONL))
	if err != nil {
		// The file is embedded and checked by TestBuiltin: a failure here is
		// a build defect, not bad input.
		panic(fmt.Sprintf("dataset: embedded open.jsonl: %v", err))
	}
	for i, t := range all {
		if i%builtinTestEvery == builtinTestEvery-1 {
			test = append(test, t)
		} else {
			train = append(train, t)
		}
	}
	return train, test
}
