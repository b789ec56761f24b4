package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metricsReader collects the runtime's OpenTelemetry metrics for `run -metrics`: an
// SDK meter provider with a manual reader, read once after the play.
type metricsReader struct {
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
}

func newMetricsReader() *metricsReader {
	r := sdkmetric.NewManualReader()
	return &metricsReader{reader: r, provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// metricPoint is one data point: a counter's or gauge's value, or a histogram's count
// and sum (seconds).
type metricPoint struct {
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Value      *int64            `json:"value,omitempty"`
	Count      *uint64           `json:"count,omitempty"`
	Sum        *float64          `json:"sum,omitempty"`
}

// points collects every data point, sorted by name and attributes.
func (m *metricsReader) points(ctx context.Context) ([]metricPoint, error) {
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(ctx, &rm); err != nil {
		return nil, err
	}
	var out []metricPoint
	attrs := func(s attribute.Set) map[string]string {
		if s.Len() == 0 {
			return nil
		}
		a := map[string]string{}
		for _, kv := range s.ToSlice() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		return a
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v := p.Value
					out = append(out, metricPoint{Name: md.Name, Attributes: attrs(p.Attributes), Value: &v})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					v := p.Value
					out = append(out, metricPoint{Name: md.Name, Attributes: attrs(p.Attributes), Value: &v})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					c, s := p.Count, p.Sum
					out = append(out, metricPoint{Name: md.Name, Attributes: attrs(p.Attributes), Count: &c, Sum: &s})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return attrText(out[i].Attributes) < attrText(out[j].Attributes)
	})
	return out, nil
}

func attrText(a map[string]string) string {
	if len(a) == 0 {
		return ""
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + a[k]
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// write prints the metrics after the summary: a table, or one JSON object
// {"type":"metrics","metrics":[...]} in JSON mode.
func (m *metricsReader) write(ctx context.Context, w io.Writer, jsonOut bool) error {
	pts, err := m.points(ctx)
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(w).Encode(struct {
			Type    string        `json:"type"`
			Metrics []metricPoint `json:"metrics"`
		}{"metrics", pts})
	}
	fmt.Fprintln(w, "\n── metrics ──────────────────────────────────────────────")
	for _, p := range pts {
		name := p.Name + attrText(p.Attributes)
		switch {
		case p.Value != nil:
			fmt.Fprintf(w, "%-60s %d\n", name, *p.Value)
		default:
			fmt.Fprintf(w, "%-60s count %d, sum %.3fs\n", name, *p.Count, *p.Sum)
		}
	}
	return nil
}
