package history

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary counts what a history holds and what Check found in it.
type Summary struct {
	// Events read and Truncated last lines dropped.
	Events, Truncated int
	// Span is from the first time the history mentions to the last.
	Span time.Duration
	// Nodes and Keys seen in calls and executions.
	Nodes, Keys int
	// Calls and their outcomes.
	Calls    int
	Outcomes map[Outcome]int
	// Execs is the number of executions; Failed, Canceled (work context
	// cancelled) and Unended (never seen to return) count among them.
	Execs, Failed, Canceled, Unended int
	// Completions counts the executions whose completion was recorded.
	Completions map[Completion]int
	// Endings counts the ended executions per Execution.Ending ("" left
	// out).
	Endings map[string]int
	// Finals is the number of keys whose final state was read.
	Finals int
	// Faults counts the faults per kind.
	Faults map[FaultKind]int
	// Anomalies counts what Check found per kind (empty from Summarize).
	Anomalies map[Kind]int
}

// Summarize counts what h holds.
func Summarize(h *History) Summary {
	s := Summary{
		Events: h.Events, Truncated: h.Truncated,
		Calls: len(h.Calls), Execs: len(h.Execs), Finals: len(h.Finals),
		Outcomes: map[Outcome]int{}, Completions: map[Completion]int{}, Endings: map[string]int{},
		Faults: map[FaultKind]int{}, Anomalies: map[Kind]int{},
	}
	first, last := h.span()
	s.Span = time.Duration(last - first)
	nodes, keys := map[string]bool{}, map[string]bool{}
	for i := range h.Calls {
		c := &h.Calls[i]
		s.Outcomes[c.Outcome]++
		nodes[c.Node], keys[c.Key] = true, true
	}
	for i := range h.Execs {
		e := &h.Execs[i]
		nodes[e.Node], keys[e.Key] = true, true
		if e.Failed {
			s.Failed++
		}
		if e.Canceled != 0 {
			s.Canceled++
		}
		if e.End == 0 {
			s.Unended++
		}
		if e.Completion != CompletionUnknown {
			s.Completions[e.Completion]++
		}
		if e.End != 0 && e.Ending != "" {
			s.Endings[e.Ending]++
		}
	}
	for i := range h.Faults {
		s.Faults[h.Faults[i].Kind]++
	}
	s.Nodes, s.Keys = len(nodes), len(keys)
	return s
}

// String renders the summary as a short table.
func (s Summary) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "history\t%d events\tspan %s, %d truncated lines dropped\n", s.Events, s.Span.Round(time.Millisecond), s.Truncated)
	fmt.Fprintf(w, "nodes, keys\t%d\t%d\n", s.Nodes, s.Keys)
	fmt.Fprintf(w, "calls\t%d\t%s\n", s.Calls, counts(s.Outcomes, func(o Outcome) string { return o.String() }))
	fmt.Fprintf(w, "executions\t%d\tfailed %d, cancelled %d, unended %d%s\n", s.Execs, s.Failed, s.Canceled, s.Unended,
		prefixed(", completions ", counts(s.Completions, func(c Completion) string { return c.String() })))
	if len(s.Endings) > 0 {
		fmt.Fprintf(w, "endings\t%d\t%s\n", total(s.Endings), counts(s.Endings, func(e string) string { return e }))
	}
	fmt.Fprintf(w, "finals\t%d\t\n", s.Finals)
	fmt.Fprintf(w, "faults\t%d\t%s\n", total(s.Faults), counts(s.Faults, func(k FaultKind) string { return string(k) }))
	n := total(s.Anomalies)
	verdict := "none"
	if n > 0 {
		verdict = counts(s.Anomalies, func(k Kind) string { return string(k) })
	}
	fmt.Fprintf(w, "anomalies\t%d\t%s\n", n, verdict)
	_ = w.Flush()
	return b.String()
}

func total[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// counts renders "name n" pairs by name, leaving out zeros.
func counts[K comparable](m map[K]int, name func(K) string) string {
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name(k), v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
