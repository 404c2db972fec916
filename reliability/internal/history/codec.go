package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// The event types of the JSON lines, the "ev" member of each line.
const (
	evInvoke     = "invoke"     // a call began: id node key fp at
	evReturn     = "return"     // a call ended: id at out value err exec
	evExecStart  = "exec-start" // fn began: id node call key fp token at
	evExecEnd    = "exec-end"   // fn returned: id at failed value err ending tombstone
	evExecCancel = "exec-cancel"
	evExecDone   = "exec-completion" // id at completion
	evFault      = "fault"           // id kind node detail at [end]
	evFaultEnd   = "fault-end"       // id at
	evFinal      = "final"           // key at sql redis expired effects
)

// event is one JSON line. Values are bytes: they travel as "value" when
// they are valid UTF-8 (readable, and exact: encoding/json round-trips valid
// UTF-8) and as base64 in "value64" otherwise.
type event struct {
	Ev         string      `json:"ev"`
	ID         string      `json:"id,omitempty"`
	Node       string      `json:"node,omitempty"`
	Call       string      `json:"call,omitempty"`
	Key        string      `json:"key,omitempty"`
	FP         string      `json:"fp,omitempty"`
	Token      string      `json:"token,omitempty"`
	At         int64       `json:"at,omitempty"`
	End        int64       `json:"end,omitempty"`
	Out        *Outcome    `json:"out,omitempty"`
	Failed     bool        `json:"failed,omitempty"`
	Value      *string     `json:"value,omitempty"`
	Value64    []byte      `json:"value64,omitempty"`
	Err        string      `json:"err,omitempty"`
	Exec       string      `json:"exec,omitempty"`
	Cause      string      `json:"cause,omitempty"`
	LeaseLost  bool        `json:"lease_lost,omitempty"`
	Completion *Completion `json:"completion,omitempty"`
	Kind       FaultKind   `json:"kind,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	SQL        *wireStored `json:"sql,omitempty"`
	Redis      *wireStored `json:"redis,omitempty"`
	Expired    bool        `json:"expired,omitempty"`
	Ending     string      `json:"ending,omitempty"`
	Tombstone  bool        `json:"tombstone,omitempty"`
	Effects    []string    `json:"effects,omitempty"`
}

type wireStored struct {
	State   StoredState `json:"state"`
	FP      string      `json:"fp,omitempty"`
	Value   *string     `json:"value,omitempty"`
	Value64 []byte      `json:"value64,omitempty"`
}

// putValue sets the value members of a line. A nil or empty value is left
// out: the checker compares bytes, and the two are the same bytes.
func putValue(v []byte, text **string, b64 *[]byte) {
	if len(v) == 0 {
		return
	}
	if utf8.Valid(v) {
		s := string(v)
		*text = &s
		return
	}
	*b64 = v
}

func getValue(text *string, b64 []byte) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, errors.New("both value and value64")
	case text != nil:
		return []byte(*text), nil
	default:
		return b64, nil
	}
}

func storedWire(s Stored) *wireStored {
	if s.State == NotRead {
		return nil
	}
	w := &wireStored{State: s.State, FP: s.Fingerprint}
	putValue(s.Value, &w.Value, &w.Value64)
	return w
}

func storedFrom(w *wireStored) (Stored, error) {
	if w == nil {
		return Stored{}, nil
	}
	v, err := getValue(w.Value, w.Value64)
	return Stored{State: w.State, Fingerprint: w.FP, Value: v}, err
}

// appendLine appends ev as one JSON line to buf.
func appendLine(buf []byte, ev *event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return buf, err
	}
	buf = append(buf, b...)
	return append(buf, '\n'), nil
}

// Encode writes h as JSON lines, one event per line: every call, execution,
// fault and final, split into the events a recorder writes. Decode reads
// them back into an equal history.
func (h *History) Encode(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var line []byte
	put := func(ev *event) error {
		var err error
		line, err = appendLine(line[:0], ev)
		if err == nil {
			_, err = bw.Write(line)
		}
		return err
	}
	for _, ev := range h.events() {
		if err := put(&ev); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// events splits h into its events.
func (h *History) events() []event {
	var evs []event
	for i := range h.Calls {
		c := &h.Calls[i]
		if c.Invoke != 0 || c.Node != "" || c.Key != "" {
			evs = append(evs, event{Ev: evInvoke, ID: c.ID, Node: c.Node, Key: c.Key, FP: c.Fingerprint, At: c.Invoke})
		}
		if c.Return != 0 || c.Outcome != Unknown {
			out := c.Outcome
			ev := event{Ev: evReturn, ID: c.ID, At: c.Return, Out: &out, Err: c.Err, Exec: c.Exec}
			putValue(c.Value, &ev.Value, &ev.Value64)
			evs = append(evs, ev)
		}
	}
	for i := range h.Execs {
		e := &h.Execs[i]
		if e.Start != 0 || e.Node != "" || e.Key != "" {
			evs = append(evs, event{Ev: evExecStart, ID: e.ID, Node: e.Node, Call: e.Call, Key: e.Key, FP: e.Fingerprint, Token: e.Token, At: e.Start})
		}
		if e.End != 0 {
			ev := event{Ev: evExecEnd, ID: e.ID, At: e.End, Failed: e.Failed, Err: e.Err, Ending: e.Ending, Tombstone: e.Tombstone}
			putValue(e.Value, &ev.Value, &ev.Value64)
			evs = append(evs, ev)
		}
		if e.Canceled != 0 {
			evs = append(evs, event{Ev: evExecCancel, ID: e.ID, At: e.Canceled, Cause: e.Cause, LeaseLost: e.LeaseLost})
		}
		if e.Completion != CompletionUnknown {
			c := e.Completion
			evs = append(evs, event{Ev: evExecDone, ID: e.ID, At: e.Completed, Completion: &c})
		}
	}
	for i := range h.Faults {
		f := &h.Faults[i]
		if f.Start == 0 && f.Kind == "" { // only its end was seen
			evs = append(evs, event{Ev: evFaultEnd, ID: f.ID, At: f.End})
			continue
		}
		evs = append(evs, event{Ev: evFault, ID: f.ID, Kind: f.Kind, Node: f.Node, Detail: f.Detail, At: f.Start, End: f.End})
	}
	for i := range h.Finals {
		f := &h.Finals[i]
		evs = append(evs, event{Ev: evFinal, Key: f.Key, At: f.At, SQL: storedWire(f.SQL), Redis: storedWire(f.Redis), Expired: f.Expired, Effects: f.Effects})
	}
	return evs
}

// maxLine bounds one line: a value larger than this is not a result idem
// keeps anyway.
const maxLine = 64 << 20

// Decode reads JSON lines (as a Recorder or Encode writes them) into a
// history, merging the parts of each call and execution by ID. Blank lines
// and lines starting with '#' are skipped (hand-written histories comment
// themselves). A last line that cannot be read and has no newline — a
// writer killed in the middle of it — is dropped and counted in Truncated;
// any other unreadable line is an error naming its line number.
func Decode(r io.Reader) (*History, error) {
	b := newBuilder()
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLine {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			if len(long) > maxLine {
				return nil, fmt.Errorf("history: line %d: longer than %d bytes", n, maxLine)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("history: line %d: %w", n, err)
		}
		last := errors.Is(err, io.EOF)
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			var ev event
			if jerr := json.Unmarshal(t, &ev); jerr != nil {
				if last { // no newline: cut off by a killed writer
					b.h.Truncated++
					break
				}
				return nil, fmt.Errorf("history: line %d: %w", n, jerr)
			}
			b.h.Events++
			b.apply(&ev)
		}
		if last {
			break
		}
	}
	return b.done(), nil
}

// Merge returns one history made of hs (the streams of several processes,
// a nemesis's faults, the final states), the parts of each call and
// execution joined by ID. A record whose parts appear twice is kept once
// and reported as a Problem: IDs must be unique across every process.
func Merge(hs ...*History) *History {
	b := newBuilder()
	for _, h := range hs {
		b.h.Events += h.Events
		b.h.Truncated += h.Truncated
		b.h.Problems = append(b.h.Problems, h.Problems...)
		for _, ev := range h.events() {
			b.apply(&ev)
		}
	}
	return b.done()
}

// builder folds events into a history.
type builder struct {
	h      History
	calls  map[string]int
	execs  map[string]int
	faults map[string]int
	finals map[string]int
	// seen records which parts of a record arrived, by "ev id".
	seen map[string]struct{}
}

func newBuilder() *builder {
	return &builder{
		calls: map[string]int{}, execs: map[string]int{}, faults: map[string]int{},
		finals: map[string]int{}, seen: map[string]struct{}{},
	}
}

func (b *builder) done() *History {
	h := b.h
	return &h
}

func (b *builder) problem(id, key, format string, args ...any) {
	b.h.Problems = append(b.h.Problems, Problem{ID: id, Key: key, Detail: fmt.Sprintf(format, args...)})
}

// keyOf returns the key an event is about, as far as known yet.
func (b *builder) keyOf(ev *event) string {
	if ev.Key != "" {
		return ev.Key
	}
	switch ev.Ev {
	case evInvoke, evReturn:
		if i, ok := b.calls[ev.ID]; ok {
			return b.h.Calls[i].Key
		}
	case evExecStart, evExecEnd, evExecCancel, evExecDone:
		if i, ok := b.execs[ev.ID]; ok {
			return b.h.Execs[i].Key
		}
	}
	return ""
}

// once reports whether this part of record ev.ID is new, and records a
// Problem when it is not.
func (b *builder) once(ev *event) bool {
	part := ev.Ev + " " + ev.ID
	if _, dup := b.seen[part]; dup {
		b.problem(ev.ID, b.keyOf(ev), "%s recorded twice for %s: IDs must be unique in a run", ev.Ev, ev.ID)
		return false
	}
	b.seen[part] = struct{}{}
	return true
}

func (b *builder) call(id string) *Call {
	i, ok := b.calls[id]
	if !ok {
		i = len(b.h.Calls)
		b.calls[id] = i
		b.h.Calls = append(b.h.Calls, Call{ID: id})
	}
	return &b.h.Calls[i]
}

func (b *builder) exec(id string) *Execution {
	i, ok := b.execs[id]
	if !ok {
		i = len(b.h.Execs)
		b.execs[id] = i
		b.h.Execs = append(b.h.Execs, Execution{ID: id})
	}
	return &b.h.Execs[i]
}

// apply folds one event into the history.
func (b *builder) apply(ev *event) {
	if ev.ID == "" && ev.Ev != evFinal {
		b.problem("", ev.Key, "a %q line without an id", ev.Ev)
		return
	}
	if ev.At <= 0 && ev.Ev != evExecDone {
		b.problem(ev.ID, b.keyOf(ev), "a %q line without a time", ev.Ev)
		return
	}
	switch ev.Ev {
	case evInvoke:
		if !b.once(ev) {
			return
		}
		c := b.call(ev.ID)
		c.Node, c.Key, c.Fingerprint, c.Invoke = ev.Node, ev.Key, ev.FP, ev.At
	case evReturn:
		if !b.once(ev) {
			return
		}
		v, err := getValue(ev.Value, ev.Value64)
		if err != nil || ev.Out == nil {
			b.problem(ev.ID, b.keyOf(ev), "return of %s: %v", ev.ID, errOr(err, "no outcome"))
			return
		}
		c := b.call(ev.ID)
		c.Return, c.Outcome, c.Value, c.Err, c.Exec = ev.At, *ev.Out, v, ev.Err, ev.Exec
	case evExecStart:
		if !b.once(ev) {
			return
		}
		e := b.exec(ev.ID)
		e.Node, e.Call, e.Key, e.Fingerprint, e.Token, e.Start = ev.Node, ev.Call, ev.Key, ev.FP, ev.Token, ev.At
	case evExecEnd:
		if !b.once(ev) {
			return
		}
		v, err := getValue(ev.Value, ev.Value64)
		if err != nil {
			b.problem(ev.ID, b.keyOf(ev), "end of %s: %v", ev.ID, err)
			return
		}
		e := b.exec(ev.ID)
		e.End, e.Failed, e.Value, e.Err, e.Ending, e.Tombstone = ev.At, ev.Failed, v, ev.Err, ev.Ending, ev.Tombstone
	case evExecCancel:
		if !b.once(ev) {
			return
		}
		e := b.exec(ev.ID)
		e.Canceled, e.Cause, e.LeaseLost = ev.At, ev.Cause, ev.LeaseLost
	case evExecDone:
		if !b.once(ev) {
			return
		}
		if ev.Completion == nil {
			b.problem(ev.ID, b.keyOf(ev), "completion of %s without a completion", ev.ID)
			return
		}
		e := b.exec(ev.ID)
		e.Completion, e.Completed = *ev.Completion, max(ev.At, 0)
	case evFault:
		if !b.once(ev) {
			return
		}
		i, ok := b.faults[ev.ID]
		if !ok {
			i = len(b.h.Faults)
			b.faults[ev.ID] = i
			b.h.Faults = append(b.h.Faults, Fault{ID: ev.ID})
		}
		f := &b.h.Faults[i]
		f.Kind, f.Node, f.Detail, f.Start = ev.Kind, ev.Node, ev.Detail, ev.At
		if ev.End != 0 {
			f.End = ev.End
		}
	case evFaultEnd:
		if !b.once(ev) {
			return
		}
		i, ok := b.faults[ev.ID]
		if !ok {
			i = len(b.h.Faults)
			b.faults[ev.ID] = i
			b.h.Faults = append(b.h.Faults, Fault{ID: ev.ID})
		}
		b.h.Faults[i].End = ev.At
	case evFinal:
		if ev.Key == "" {
			b.problem("", "", "a final state without a key")
			return
		}
		if _, dup := b.finals[ev.Key]; dup {
			b.problem("", ev.Key, "two final states for key %q", ev.Key)
			return
		}
		sql, err1 := storedFrom(ev.SQL)
		redis, err2 := storedFrom(ev.Redis)
		if err := errors.Join(err1, err2); err != nil {
			b.problem("", ev.Key, "final state of %q: %v", ev.Key, err)
			return
		}
		b.finals[ev.Key] = len(b.h.Finals)
		b.h.Finals = append(b.h.Finals, Final{Key: ev.Key, SQL: sql, Redis: redis, Expired: ev.Expired, At: ev.At, Effects: ev.Effects})
	default:
		b.problem(ev.ID, b.keyOf(ev), "unknown event %q", ev.Ev)
	}
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}
