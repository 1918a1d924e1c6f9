package score

import "testing"

const benchResponse = "First, 16 - 3 - 4 = 9 eggs remain. She sells them at $2 each, so 9 * 2 = 18.\n" +
	"Therefore the answer is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$."

func BenchmarkNumeric(b *testing.B) {
	for b.Loop() {
		Numeric(benchResponse, "18")
	}
}

func BenchmarkMath(b *testing.B) {
	for b.Loop() {
		Math(benchResponse, `\left( 3, \frac{\pi}{2} \right)`)
	}
}

func BenchmarkChoice(b *testing.B) {
	for b.Loop() {
		Choice("Option (A) is tempting, but the answer is C.", "C")
	}
}

func BenchmarkBBH(b *testing.B) {
	for b.Loop() {
		BBH("word_sorting", "Let's think step by step. So the answer is artillery bainite doris fda harm.", "artillery bainite doris fda harm")
	}
}
