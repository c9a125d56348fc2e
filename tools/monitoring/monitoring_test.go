package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	grafanaprom "github.com/grafana/grafana-foundation-sdk/go/prometheus"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/pvediskcheck/pvediskcheck/metrics"
)

//lint:file-ignore SA1019 the dashboard is Grafana's classic JSON model (dashboard v1), the one Grafana imports from a file and provisions without the dynamic-dashboards feature flag; dashboardv2 would change share/prometheus/pvediskcheck.grafana.json

// pending are metrics the rules and the dashboard use that the tool does
// not export yet (a branch adding them not merged), each with why. The
// test fails once the tool exports one (remove it here then) and for one
// no query uses. Empty: every metric used is exported.
var pending = map[string]string{}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

// exported is every metric the tool exports, with its labels, read from
// the metrics package's own descriptors (Snapshot.Describe: the set is
// fixed), not from a list kept here.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prom.Desc)
	go func() {
		(&metrics.Snapshot{}).Describe(ch)
		close(ch)
	}()
	nameRe := regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRe := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		n, l := nameRe.FindStringSubmatch(s), labelsRe.FindStringSubmatch(s)
		if n == nil || l == nil {
			t.Fatalf("descriptor not understood (client_golang's Desc.String changed?): %s", s)
		}
		var labels []string
		if l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		out[n[1]] = labels
	}
	if len(out) < 20 {
		t.Fatalf("%d metrics described, want the tool's full set: %v", len(out), out)
	}
	return out
}

// grafanaVars are the values Grafana substitutes in the queries, as a
// query sent with every variable at "All" (.*) reads.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$"+varNode, ".*", "$"+varVM, ".*", "$"+varDisk, ".*")

// labelValuesRe is Grafana's label_values(selector, label) of a variable.
var labelValuesRe = regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)

// expr is one PromQL expression of the rules or the dashboard.
type expr struct {
	where string // rule or panel
	text  string
}

func committed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(DefaultDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadDashboard reads the committed JSON back into the SDK's dashboard
// model, every panel and query typed.
func loadDashboard(t *testing.T) dashboard.Dashboard {
	t.Helper()
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard
	dec := json.NewDecoder(bytes.NewReader(committed(t, DashboardFile)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not a dashboard model: %v", DashboardFile, err)
	}
	return d
}

// panels are the dashboard's panels that are not rows.
func panels(d dashboard.Dashboard) []dashboard.Panel {
	var out []dashboard.Panel
	for _, p := range d.Panels {
		if p.Panel != nil {
			out = append(out, *p.Panel)
		}
		if p.RowPanel != nil {
			out = append(out, p.RowPanel.Panels...)
		}
	}
	return out
}

// exprs is every expression of the committed files: each rule's, each
// panel query's, and each variable's selector.
func exprs(t *testing.T) []expr {
	t.Helper()
	groups, errs := rulefmt.Parse(committed(t, RulesFile), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", RulesFile, errs)
	}
	var out []expr
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, expr{"rule " + r.Alert, r.Expr})
		}
	}
	d := loadDashboard(t)
	for _, p := range panels(d) {
		for i, q := range p.Targets {
			pq, ok := q.(*grafanaprom.Dataquery)
			if !ok {
				t.Fatalf("panel %q query %d is a %T, not a Prometheus query", *p.Title, i, q)
			}
			out = append(out, expr{"panel " + *p.Title, grafanaVars.Replace(pq.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRe.FindStringSubmatch(*v.Query.String)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(selector, label)", v.Name, *v.Query.String)
		}
		out = append(out, expr{"variable " + v.Name, grafanaVars.Replace(m[1])})
	}
	return out
}

// The committed files are what the generator writes: edit rules.go or
// dashboard.go, then make monitoring.
func TestCommittedFilesAreGenerated(t *testing.T) {
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if got := committed(t, name); !bytes.Equal(got, want) {
			t.Errorf("%s differs from what tools/monitoring generates: run make monitoring", filepath.Join("share/prometheus", name))
		}
	}
}

// Every expression parses as PromQL and names only metrics the tool
// exports (or pending ones), each with labels it has.
func TestExpressionsNameExportedMetrics(t *testing.T) {
	have := exported(t)
	for name, why := range pending {
		if _, ok := have[name]; ok {
			t.Errorf("%s is exported now (%s): remove it from pending", name, why)
		}
	}
	used := map[string]bool{}
	all := exprs(t)
	for _, e := range all {
		ast, err := parser.NewParser(parser.Options{}).ParseExpr(e.text)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", e.where, e.text, err)
			continue
		}
		n := 0
		// by (...) and on (...) name labels of some metric, a target's, or
		// one label_replace adds in the expression.
		grouping := map[string]bool{}
		for _, l := range targetLabels {
			grouping[l] = true
		}
		for _, ls := range have {
			for _, l := range ls {
				grouping[l] = true
			}
		}
		var grouped []string
		parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
			switch x := node.(type) {
			case *parser.AggregateExpr:
				grouped = append(grouped, x.Grouping...)
			case *parser.BinaryExpr:
				if x.VectorMatching != nil {
					grouped = append(grouped, x.VectorMatching.MatchingLabels...)
				}
			case *parser.Call:
				if x.Func.Name == "label_replace" {
					grouping[x.Args[1].(*parser.StringLiteral).Val] = true
				}
			}
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			n++
			used[vs.Name] = true
			labels, ok := have[vs.Name]
			if _, p := pending[vs.Name]; p {
				labels, ok = []string{"vmid", "disk"}, true
			}
			if !ok {
				t.Errorf("%s: %s is not a metric the tool exports", e.where, vs.Name)
				return nil
			}
			known := append(append([]string{model.MetricNameLabel}, targetLabels...), labels...)
			for _, lm := range vs.LabelMatchers {
				if !contains(known, lm.Name) {
					t.Errorf("%s: %s has no label %s (it has %v)", e.where, vs.Name, lm.Name, labels)
				}
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%s: %q selects no metric", e.where, e.text)
		}
		for _, l := range grouped {
			if !grouping[l] {
				t.Errorf("%s: groups or matches on %s, a label no metric has", e.where, l)
			}
		}
	}
	for name := range pending {
		if !used[name] {
			t.Errorf("pending %s is used by no rule or panel: remove it", name)
		}
	}
	t.Logf("%d expressions, %d metrics of %d exported (+%d pending) used", len(all), len(used)-len(pending), len(have), len(pending))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The rule file is valid for Prometheus (rulefmt: known fields, alert
// names, durations, templates), has the generator's rules, and each rule
// has a severity, a summary and a description.
func TestRuleFile(t *testing.T) {
	groups, errs := rulefmt.Parse(committed(t, RulesFile), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Record != "" {
				t.Errorf("%s: a recording rule; the file ships alerts only", r.Record)
			}
			if s := r.Labels["severity"]; s != Critical && s != Warning {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: annotations %v", r.Alert, r.Annotations)
			}
			for k, a := range r.Annotations {
				if rest := labelRefRe.ReplaceAllString(a, ""); strings.Contains(rest, "{{") {
					t.Errorf("%s: annotation %s uses more than {{ $labels.NAME }}: %q", r.Alert, k, a)
				}
			}
		}
	}
	var want []string
	for _, r := range Rules().Groups[0].Rules {
		want = append(want, r.Alert)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("rules %v, want %v", names, want)
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			t.Errorf("alert %s twice", sorted[i])
		}
	}
}

// The dashboard has the node, VM and disk variables, chained (a VM of the
// nodes chosen, a disk of those VMs), every panel queries the data source
// variable with at least one query, and each section has its panels.
func TestDashboardModel(t *testing.T) {
	d := loadDashboard(t)
	if d.Uid == nil || *d.Uid != DashboardUID || d.Title == nil || *d.Title == "" {
		t.Errorf("uid %v title %v", d.Uid, d.Title)
	}
	vars := map[string]dashboard.VariableModel{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars[varDatasource]; !ok || v.Type != "datasource" {
		t.Errorf("no datasource variable: %v", vars)
	}
	for name, dependsOn := range map[string]string{varNode: "", varVM: "$" + varNode, varDisk: "$" + varVM} {
		v, ok := vars[name]
		if !ok || v.Type != "query" || v.Query == nil || v.Query.String == nil {
			t.Errorf("variable %s missing or not a query: %+v", name, v)
			continue
		}
		if !strings.Contains(*v.Query.String, dependsOn) {
			t.Errorf("variable %s: %q does not follow %s", name, *v.Query.String, dependsOn)
		}
	}
	var titles []string
	rows := 0
	for _, p := range d.Panels {
		if p.RowPanel != nil {
			rows++
			titles = append(titles, "row:"+*p.RowPanel.Title)
		}
		if p.Panel != nil {
			titles = append(titles, *p.Panel.Title)
		}
	}
	for _, p := range panels(d) {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", *p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if pq, ok := q.(*grafanaprom.Dataquery); ok && pq.RefId != nil && *pq.RefId != "" {
				refs[*pq.RefId] = true
			}
		}
		if len(refs) != len(p.Targets) {
			t.Errorf("panel %q: %d queries, refIds %v", *p.Title, len(p.Targets), refs)
		}
		if p.Datasource == nil || p.Datasource.Uid == nil || *p.Datasource.Uid != "${"+varDatasource+"}" {
			t.Errorf("panel %q: datasource %v", *p.Title, p.Datasource)
		}
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: no place on the grid: %v", *p.Title, p.GridPos)
		}
	}
	joined := strings.Join(titles, "|")
	for _, want := range []string{"row:Node overview", "Thin pools", "Findings", "Collection errors", "row:VM and disk",
		"Throughput", "Latency", "Queue", "Limit use", "Stalled", "Iothread CPU"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no panel %q in %s", want, joined)
		}
	}
	if strings.Index(joined, "row:Node overview") > strings.Index(joined, "Thin pools") || strings.Index(joined, "row:VM and disk") > strings.Index(joined, "Throughput") {
		t.Errorf("panels out of their rows: %s", joined)
	}
	if rows != 2 {
		t.Errorf("%d rows", rows)
	}
	// Read back and written again, the model is the file: nothing in it
	// is unknown to the SDK's types.
	again, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(again, '\n'), committed(t, DashboardFile)) {
		t.Errorf("%s does not survive a round trip through the SDK's dashboard model", DashboardFile)
	}
	t.Logf("%d panels in %d rows, %d variables", len(panels(d)), rows, len(d.Templating.List))
}
