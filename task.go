package delegate

// Task is one item of a dataset: a prompt and, where there is one, a reference answer.
// Verifiers check against the reference.
type Task struct {
	ID      string   `json:"id"`
	Dataset string   `json:"dataset"`           // "gsm8k", "math", "mmlu", "bbh", "open", ...
	Subject string   `json:"subject,omitempty"` // MMLU subject, BBH task, MATH type
	Prompt  string   `json:"prompt"`
	Answer  string   `json:"answer,omitempty"`  // "" for open-ended requests
	Choices []string `json:"choices,omitempty"` // MMLU options A-D, in order
}
