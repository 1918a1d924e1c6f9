package delegate

import (
	"sort"
	"time"
)

// CriticalPath returns the model time along the slowest chain of calls below n, and its call count.
// A group's children run in stages.
// A child that starts before every earlier sibling has ended joins their stage.
// Stages add up; within a stage only the slowest child counts, as in Kimi PARL's critical steps.
// A call counts its own latency. Time the program spends between calls is not counted.
func CriticalPath(n *Node) (time.Duration, int) {
	if n == nil {
		return 0, 0
	}
	if n.IsCall() {
		return n.Latency, 1
	}
	kids := append([]*Node(nil), n.Children...)
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].Start.Before(kids[j].Start) })
	var total, stageMax time.Duration
	var calls, stageCalls int
	var stageEnd time.Time
	for i, c := range kids {
		d, k := CriticalPath(c)
		if i > 0 && !c.Start.Before(stageEnd) {
			total, calls = total+stageMax, calls+stageCalls
			stageMax, stageCalls = 0, 0
		}
		if d > stageMax || d == stageMax && k > stageCalls {
			stageMax, stageCalls = d, k
		}
		if end := nodeEnd(c); i == 0 || end.After(stageEnd) {
			stageEnd = end
		}
	}
	return total + stageMax, calls + stageCalls
}

// nodeEnd is when n ended: its start plus its latency.
// The latest end below it wins when later, as for a group not yet closed.
func nodeEnd(n *Node) time.Time {
	end := n.Start.Add(n.Latency)
	for _, c := range n.Children {
		if e := nodeEnd(c); e.After(end) {
			end = e
		}
	}
	return end
}
