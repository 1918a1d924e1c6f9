package judge

// Stats describes the judge's behaviour over many verdicts. A rate whose
// denominator is zero is 0; the counts beside it say so.
type Stats struct {
	Verdicts    int `json:"verdicts"`
	Wins        int `json:"wins"`
	Losses      int `json:"losses"`
	Ties        int `json:"ties"`
	Unparseable int `json:"unparseable"` // verdicts with no outcome
	// TieRate is Ties over the verdicts with an outcome.
	TieRate float64 `json:"tie_rate"`
	// Paired counts verdicts with both orders judged and parsed;
	// Consistent those whose two orders gave the same outcome.
	Paired     int `json:"paired"`
	Consistent int `json:"consistent"`
	// ConsistencyRate is Consistent over Paired: how often the verdict
	// survives swapping the answers' positions.
	ConsistencyRate float64 `json:"consistency_rate"`
	// Calls counts judge calls; CallErrors those that failed;
	// ParseFailures those that answered without parseable scores.
	Calls         int `json:"calls"`
	CallErrors    int `json:"call_errors"`
	ParseFailures int `json:"parse_failures"`
	// ParseFailureRate is ParseFailures over the calls that answered.
	ParseFailureRate float64 `json:"parse_failure_rate"`
	// FirstPreferred counts parsed pairwise calls that scored answer A above B.
	// A is the answer shown first. Decisive counts the calls that scored the
	// two differently; FirstPreferenceRate is their ratio. With both orders
	// judged, an unbiased judge sits near 0.5.
	FirstPreferred      int     `json:"first_preferred"`
	Decisive            int     `json:"decisive"`
	FirstPreferenceRate float64 `json:"first_preference_rate"`
	// MeanDiff is the mean of Diff over the verdicts with an outcome.
	MeanDiff float64 `json:"mean_diff"`
}

// Summarize computes Stats over vs.
func Summarize(vs []Verdict) Stats {
	var s Stats
	s.Verdicts = len(vs)
	var diffSum float64
	for _, v := range vs {
		switch v.Outcome {
		case Win:
			s.Wins++
		case Loss:
			s.Losses++
		case Tie:
			s.Ties++
		default:
			s.Unparseable++
		}
		if v.Outcome != "" {
			diffSum += v.Diff
		}
		if v.Paired {
			s.Paired++
			if v.Consistent {
				s.Consistent++
			}
		}
		for _, o := range v.Orders {
			s.Calls++
			switch {
			case o.CallError != "":
				s.CallErrors++
			case !o.Parsed:
				s.ParseFailures++
			case o.Order == CandidateFirst || o.Order == BaselineFirst:
				if o.ScoreA != o.ScoreB {
					s.Decisive++
					if o.ScoreA > o.ScoreB {
						s.FirstPreferred++
					}
				}
			}
		}
	}
	decided := s.Wins + s.Losses + s.Ties
	s.TieRate = ratio(s.Ties, decided)
	s.ConsistencyRate = ratio(s.Consistent, s.Paired)
	s.ParseFailureRate = ratio(s.ParseFailures, s.Calls-s.CallErrors)
	s.FirstPreferenceRate = ratio(s.FirstPreferred, s.Decisive)
	if decided > 0 {
		s.MeanDiff = diffSum / float64(decided)
	}
	return s
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}
