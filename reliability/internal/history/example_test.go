package history_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/idemkit/idem/reliability/internal/history"
)

// Two processes record their calls; the second ran the work again after
// the first had answered. Merged and checked, the history says so.
func ExampleCheck() {
	clock := clockFrom(1000)
	var n1, n2, nem bytes.Buffer
	r1 := history.NewRecorder(&n1, "n1", clock)
	r2 := history.NewRecorder(&n2, "n2", clock)
	nemesis := history.NewRecorder(&nem, "nemesis", clock)

	p := r1.Invoke("order-42", "fp")
	x := p.ExecStart("")
	x.End([]byte("charged 10 EUR"), nil)
	p.Return(history.Executed, []byte("charged 10 EUR"), nil)

	nemesis.Fault(history.RedisFlush, "", "FLUSHALL").End()

	p = r2.Invoke("order-42", "fp")
	x = p.ExecStart("")
	x.End(nil, errors.New("card declined: duplicate"))
	p.Return(history.FnFailed, nil, errors.New("card declined: duplicate"))

	var parts []*history.History
	for _, b := range []*bytes.Buffer{&n1, &n2, &nem} {
		h, err := history.Decode(b)
		if err != nil {
			panic(err)
		}
		parts = append(parts, h)
	}
	r := history.Check(history.Merge(parts...), history.Options{})
	for _, a := range r.Anomalies {
		fmt.Println(a)
	}
	// Output:
	// rerun-after-success key="order-42": execution n2/e1 on n2 started at +7ns, after the key was done: execution n1/e1, whose result was delivered to n1/c1, returned at +2ns
	//   executions: n1/e1 n2/e1
	//   faults around it: redis-flush[nemesis/f1]
}
