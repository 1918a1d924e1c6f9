package delegate

// Verdict is a verifier's word on one response to a task.
// It says whether the response is right and what answer it was read as.
// A wrong verdict can then be traced to the reading that made it.
type Verdict struct {
	Correct   bool   // the answer read from the response is the reference's
	Extracted string // the answer read from the response, normalised; "" when none was found
	Found     bool   // an answer could be read from the response at all
	Method    string // how it was read: "boxed", "answer is", "####", "last number", ...
}

// Verifier says whether response answers t right, by checking it against
// t's reference answer, without calls of its own. An error means the
// response could not be checked at all (t has no usable reference, or no
// verifier knows its dataset), never that it is wrong. A Verifier is
// deterministic and safe for concurrent use. Package score's Verify is the
// verifier of the benchmark datasets; package world's that of its
// problems.
type Verifier func(t Task, response string) (Verdict, error)
