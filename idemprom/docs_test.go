package idemprom_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/sqllayer"
)

// The operating guide names every metric the Collector exports, and no
// metric it does not: a renamed or added metric fails here until the guide
// says so.
func TestOperatingGuideNamesTheMetrics(t *testing.T) {
	doc, err := os.ReadFile("../docs/operating.md")
	if os.IsNotExist(err) {
		t.Skip("the guide is not in this module's copy (a published module zip holds its own directory only)")
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := idemprom.New()
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	c.Describe(ch)
	close(ch)
	var exported []string
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		exported = append(exported, m[1])
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(idem_[a-z_]+)").FindAllStringSubmatch(string(doc), -1) {
		if m[1] == sqllayer.DefaultAuditTable {
			continue // a table the guide names, not a metric
		}
		named[m[1]] = true
	}
	for _, name := range exported {
		if !named[name] {
			t.Errorf("docs/operating.md does not name %s", name)
		}
	}
	for name := range named {
		if !slices.Contains(exported, name) {
			t.Errorf("docs/operating.md names %s, which the Collector does not export", name)
		}
	}
	if len(exported) < 9 {
		t.Fatalf("only %d metrics described: %v", len(exported), exported)
	}
}
