package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/taskrt/taskrt/messages"
)

// The runtime's OpenTelemetry metrics (WithMeterProvider), under the meter
// "github.com/taskrt/taskrt/actors":
//
//	taskrt.tasks.started        counter    tasks started                  {kind}
//	taskrt.tasks.settled        counter    tasks settled                  {kind, status}
//	taskrt.task.duration        histogram  start → settled, seconds       {kind, status}
//	taskrt.task.stop_duration   histogram  cancelled → settled, seconds   {kind}
//	taskrt.notices              counter    completion notices             {result: delivered | suppressed}
//	taskrt.tasks.abandoned      counter    tasks that did not settle within the settle timeout
//	taskrt.tasks.evicted        counter    settled tasks retention turned into tombstones
//	taskrt.tasks.live           gauge      tasks running or stopping
//	taskrt.tasks.retained       gauge      settled tasks that keep their full record
//	taskrt.tasks.tombstones     gauge      tombstones held
//	taskrt.agents.live          gauge      registered agents
//
// Recording costs an atomic add or two per event; the gauges are read from the same
// counters Stats reads, when the meter provider collects.
const meterName = "github.com/taskrt/taskrt/actors"

type instruments struct {
	started, settled, notices, abandoned, evicted metric.Int64Counter
	duration, stopDuration                        metric.Float64Histogram
	registration                                  metric.Registration
}

func newInstruments(rt *Runtime, mp metric.MeterProvider) (*instruments, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
	var in instruments
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		return h
	}
	in.started = counter("taskrt.tasks.started", "Tasks started.")
	in.settled = counter("taskrt.tasks.settled", "Tasks settled, by status.")
	in.notices = counter("taskrt.notices", "Completion notices delivered, or suppressed because the model had seen the end.")
	in.abandoned = counter("taskrt.tasks.abandoned", "Tasks recorded failed because they did not settle within the settle timeout after cancel.")
	in.evicted = counter("taskrt.tasks.evicted", "Settled tasks evicted by retention (a tombstone remains).")
	in.duration = hist("taskrt.task.duration", "Time from a task's start to its settlement.")
	in.stopDuration = hist("taskrt.task.stop_duration", "Time from a task's cancellation (kill or teardown) to its settlement.")
	if err != nil {
		return nil, err
	}
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		if err != nil {
			return nil
		}
		var g metric.Int64ObservableGauge
		g, err = m.Int64ObservableGauge(name, metric.WithDescription(desc))
		return g
	}
	live := gauge("taskrt.tasks.live", "Tasks running or stopping.")
	retained := gauge("taskrt.tasks.retained", "Settled tasks that keep their full record.")
	tombs := gauge("taskrt.tasks.tombstones", "Evicted tasks answered from a tombstone.")
	agents := gauge("taskrt.agents.live", "Registered agents.")
	if err != nil {
		return nil, err
	}
	in.registration, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := rt.Stats()
		o.ObserveInt64(live, int64(s.Running))
		o.ObserveInt64(retained, int64(s.Retained))
		o.ObserveInt64(tombs, int64(s.Tombstones))
		o.ObserveInt64(agents, int64(s.Agents))
		return nil
	}, live, retained, tombs, agents)
	if err != nil {
		return nil, err
	}
	return &in, nil
}

var bg = context.Background()

func (in *instruments) taskStarted(kind string) {
	in.started.Add(bg, 1, metric.WithAttributes(attribute.String("kind", kind)))
}

func (in *instruments) taskSettled(s messages.Snapshot) {
	attrs := metric.WithAttributes(attribute.String("kind", s.Kind), attribute.String("status", string(s.Status)))
	in.settled.Add(bg, 1, attrs)
	in.duration.Record(bg, s.Finished.Sub(s.Started).Seconds(), attrs)
}

func (in *instruments) taskStopped(kind string, d time.Duration) {
	in.stopDuration.Record(bg, d.Seconds(), metric.WithAttributes(attribute.String("kind", kind)))
}

func (in *instruments) notice(result string) {
	in.notices.Add(bg, 1, metric.WithAttributes(attribute.String("result", result)))
}
