package main

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

//lint:file-ignore SA1019 the dashboard is Grafana's classic JSON model (dashboard v1), the one Grafana imports from a file and provisions without the dynamic-dashboards feature flag; dashboardv2 would change share/prometheus/pvediskcheck.grafana.json

// DashboardUID is the dashboard's fixed uid: an import replaces the one
// imported before instead of adding a copy.
const DashboardUID = "pvediskcheck"

// The dashboard's variables, as the queries spell them. node is the
// scrape's instance label: the node running `metrics --listen`, or the
// node_exporter reading its textfile.
const (
	varDatasource = "datasource"
	varNode       = "node"
	varVM         = "vmid"
	varDisk       = "disk"
)

// Selectors of the queries: the node's series, and a disk's.
const (
	nodeSel = `{instance=~"$node"}`
	vmSel   = `{instance=~"$node",vmid=~"$vmid"}`
	diskSel = `{instance=~"$node",vmid=~"$vmid",disk=~"$disk"}`
)

// rate is Grafana's window for rate(): at least four scrape intervals.
const rateWindow = "$__rate_interval"

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + varDatasource + "}")}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().Expr(expr).Datasource(datasource)
	if legend != "" {
		q.LegendFormat(legend)
	}
	return q
}

// instant is a query for a table or stat: the latest value only.
func instant(expr string) *prometheus.DataqueryBuilder {
	return query(expr, "").Instant().Format(prometheus.PromQueryFormatTable)
}

func series(title, desc, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(datasource).
		Height(8).Span(12).Min(0).FillOpacity(10)
	for _, q := range queries {
		p.WithTarget(q)
	}
	return p
}

// statPanel shows each series' last value.
func statPanel(title, desc string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Datasource(datasource).Height(6).Span(6).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).Orientation(common.VizOrientationAuto)
}

// withRefIDs names each panel's queries A, B, C... as Grafana does.
func withRefIDs(d dashboard.Dashboard) dashboard.Dashboard {
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		for i, t := range p.Panel.Targets {
			if q, ok := t.(prometheus.Dataquery); ok && q.RefId == nil {
				q.RefId = cog.ToPtr(string(rune('A' + i)))
				p.Panel.Targets[i] = q
			}
		}
	}
	return d
}

// poolThresholds colour a pool's use as thin judges it.
func poolThresholds() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Value: nil, Color: "green"},
		{Value: cog.ToPtr(thinpool.WarnPercent / 100), Color: "orange"},
		{Value: cog.ToPtr(thinpool.FailPercent / 100), Color: "red"},
	})
}

// countThresholds: green at 0, red from 1 (errors, stalls).
func countThresholds() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
		{Value: nil, Color: "green"},
		{Value: cog.ToPtr(1.0), Color: "red"},
	})
}

func variable(name, label, q string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).Definition(q).
		Datasource(datasource).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).Multi(true).IncludeAll(true).AllValue(".*")
}

// perDisk is a rate per disk of the counters named, one query each.
func perDisk(legend string, names ...string) []*prometheus.DataqueryBuilder {
	var qs []*prometheus.DataqueryBuilder
	for _, n := range names {
		qs = append(qs, query(fmt.Sprintf("rate(%s%s[%s])", m("disk_"+n+"_total"), diskSel, rateWindow), legend+" "+n))
	}
	return qs
}

// latency is the mean time of a request kind: time spent over requests.
func latency(kind string) *prometheus.DataqueryBuilder {
	return query(fmt.Sprintf("rate(%s%s[%s]) / rate(%s%s[%s])",
		m("disk_"+kind+"_seconds_total"), diskSel, rateWindow, m("disk_"+kind+"_operations_total"), diskSel, rateWindow),
		"{{vmid}}/{{disk}} "+kind)
}

// Dashboard is the Grafana dashboard the package ships.
func Dashboard() (dashboard.Dashboard, error) {
	disk := "{{vmid}}/{{disk}}"
	b := dashboard.NewDashboardBuilder("pvediskcheck: VM disks").
		Uid(DashboardUID).
		Description("What every VM disk of the Proxmox VE nodes runs with and does, from pvediskcheck metrics: thin pools, check's findings and the collection's health per node; per VM and disk the rates, latency, queue, limit use, stalls and the iothreads' CPU.").
		Tags([]string{"pvediskcheck", "proxmox"}).
		Refresh("1m").Time("now-6h", "now").Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(varDatasource).Label("Data source").Type("prometheus")).
		WithVariable(variable(varNode, "Node", fmt.Sprintf("label_values(%s, instance)", m("collect_duration_seconds")))).
		WithVariable(variable(varVM, "VM", fmt.Sprintf("label_values(%s%s, vmid)", m("disk_info"), nodeSel))).
		WithVariable(variable(varDisk, "Disk", fmt.Sprintf("label_values(%s%s, disk)", m("disk_info"), vmSel)))

	b.WithRow(dashboard.NewRowBuilder("Node overview"))
	b.WithPanel(statPanel("Collection errors",
		"pvediskcheck_collect_errors by source: what the last collection could not read (a VM whose QMP socket stayed busy has no disk series).").
		Thresholds(countThresholds()).
		WithTarget(query(fmt.Sprintf("sum by (instance, source) (%s%s)", m("collect_errors"), nodeSel), "{{instance}} {{source}}").Instant()))
	b.WithPanel(statPanel("Disks stalled now",
		"Disks whose guest has requests outstanding that none completes (pvediskcheck_disk_stalled_seconds above 0).").
		Thresholds(countThresholds()).
		WithTarget(query(fmt.Sprintf("count by (instance) (%s%s > 0) or sum by (instance) (%s%s * 0)",
			m("disk_stalled_seconds"), nodeSel, m("disk_info"), nodeSel), "{{instance}}").Instant()))
	b.WithPanel(statPanel("Findings by severity", "pvediskcheck check's findings on the node's VMs, counted by severity.").
		WithTarget(query(fmt.Sprintf("sum by (instance, severity) (%s%s)", m("check_findings"), nodeSel), "{{instance}} {{severity}}").Instant()))
	b.WithPanel(series("Collection duration", "How long each collection took (--listen: within --deadline, 8 s).", "s",
		query(m("collect_duration_seconds")+nodeSel, "{{instance}}")).Span(6).Height(6))
	b.WithPanel(bargauge.NewPanelBuilder().Title("Thin pools: data and metadata in use").
		Description("Each thin pool's data and metadata use, coloured at thin's thresholds (80 %, 90 %).").
		Datasource(datasource).Height(8).Span(12).Unit("percentunit").Min(0).Max(1).Thresholds(poolThresholds()).
		WithTarget(query(m("thinpool_data_used_ratio")+nodeSel, "{{instance}} {{storage}} data").Instant()).
		WithTarget(query(m("thinpool_metadata_used_ratio")+nodeSel, "{{instance}} {{storage}} metadata").Instant()))
	b.WithPanel(series("Thin pools: use and overcommit",
		"Data use and the volumes' virtual sizes over the pool's size (above 1 the pool can fill before its volumes do).", "percentunit",
		query(m("thinpool_data_used_ratio")+nodeSel, "{{instance}} {{storage}} data"),
		query(m("thinpool_metadata_used_ratio")+nodeSel, "{{instance}} {{storage}} metadata"),
		query(m("thinpool_overcommit_ratio")+nodeSel, "{{instance}} {{storage}} overcommit")))
	b.WithPanel(table.NewPanelBuilder().Title("Findings").
		Description("pvediskcheck check's findings per VM, code and severity; pvediskcheck check VMID on the node says what and the fix.").
		Datasource(datasource).Height(8).Span(24).
		WithTarget(instant(fmt.Sprintf("sum by (instance, vmid, code, severity) (%s%s)", m("check_findings"), nodeSel))))

	b.WithRow(dashboard.NewRowBuilder("VM and disk"))
	b.WithPanel(table.NewPanelBuilder().Title("Disks").
		Description("What each disk runs with as read from QEMU: cache mode configured and in effect, aio, the iothread serving it, discard.").
		Datasource(datasource).Height(6).Span(24).
		WithTarget(instant(m("disk_info") + diskSel)))
	b.WithPanel(series("Throughput", "Bytes read and written per second by the guest.", "Bps", perDisk(disk, "read_bytes", "write_bytes")...))
	b.WithPanel(series("Requests", "Read, write and flush requests completed per second.", "reqps", perDisk(disk, "read_operations", "write_operations", "flush_operations")...))
	b.WithPanel(series("Latency", "Mean time of a request: time spent over requests completed.", "s", latency("read"), latency("write"), latency("flush")))
	b.WithPanel(series("Queue", "Requests in flight on average: the time requests spent, per second (Little's law).", "short",
		query(fmt.Sprintf("rate(%s%s[%s]) + rate(%s%s[%s]) + rate(%s%s[%s])",
			m("disk_read_seconds_total"), diskSel, rateWindow, m("disk_write_seconds_total"), diskSel, rateWindow,
			m("disk_flush_seconds_total"), diskSel, rateWindow), disk)))
	b.WithPanel(series("Limit use", fmt.Sprintf("Share of each running I/O limit used, as top's LIMIT%%: at %g %% or more the throttle decides the latency.", LimitSaturatedRatio*100), "percentunit",
		query(LimitUse(diskSel, rateWindow), disk+" {{direction}} {{limit}}")))
	b.WithPanel(series("Stalled", "Seconds each disk has completed no request while the guest has some outstanding (0: not stalled).", "s",
		query(m("disk_stalled_seconds")+diskSel, disk)))
	b.WithPanel(series("Failed and invalid requests", "Requests that ended in an error, and those QEMU refused, per second.", "reqps",
		perDisk(disk, "failed_operations", "invalid_operations")...))
	b.WithPanel(series("Iothread CPU", "CPU time per second of the iothreads serving the disks shown (1: a whole core; an event loop near 1 cannot take more).", "percentunit",
		query(fmt.Sprintf("rate(%s%s[%s]) and on (instance, vmid, iothread) %s%s",
			m("iothread_cpu_seconds_total"), vmSel, rateWindow, m("disk_info"), diskSel), "{{vmid}} {{iothread}}")))
	b.WithPanel(series("QEMU CPU by role", "CPU time per second of the VM's QEMU threads: main loop, iothreads, vCPUs.", "percentunit",
		query(fmt.Sprintf("rate(%s%s[%s])", m("vm_cpu_seconds_total"), vmSel, rateWindow), "{{vmid}} {{role}}")))
	d, err := b.Build()
	return withRefIDs(d), err
}
