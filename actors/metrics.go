package actors

import (
	"context"
	"sync"
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
//	taskrt.tasks.enqueued       counter    starts queued at a cap         {kind}
//	taskrt.tasks.queued         updown     tasks queued now               {kind}
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
// Without WithMeterProvider nothing is recorded: the instruments come from
// OpenTelemetry's no-op provider, created once with the runtime, and no measurement
// reaches them (each recording returns at once). With one, recording costs the SDK's own atomic adds: the attribute sets are built
// once per kind and status and reused; the gauges are read from the same counters
// Stats reads, when the meter provider collects.
//
// A queued start (WithQueue) counts once in taskrt.tasks.enqueued when it is queued,
// and in taskrt.tasks.started only when it gets a slot and runs; taskrt.tasks.queued
// goes up when it is queued and down when it leaves the queue, by starting or by
// settling while queued (killed, or torn down with its owner). taskrt.tasks.live
// counts queued tasks too: they are not settled. The registry records these before
// it publishes the matching event.
const meterName = "github.com/taskrt/taskrt/actors"

type instruments struct {
	on                                            bool // a meter provider was given
	started, settled, notices, abandoned, evicted metric.Int64Counter
	enqueued                                      metric.Int64Counter
	queued                                        metric.Int64UpDownCounter
	duration, stopDuration                        metric.Float64Histogram
	registration                                  metric.Registration

	mu       sync.Mutex
	byKind   map[string]*attrOpts    // {kind}
	byStatus map[[2]string]*attrOpts // {kind, status}
	byResult map[string]*attrOpts    // {result}
}

// attrOpts is one attribute set as ready-made option slices: passed on with ...,
// an existing slice costs no allocation per measurement.
type attrOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newInstruments(rt *Runtime, mp metric.MeterProvider) (*instruments, error) {
	in := instruments{on: mp != nil,
		byKind:   map[string]*attrOpts{},
		byStatus: map[[2]string]*attrOpts{},
		byResult: map[string]*attrOpts{}}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
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
	in.enqueued = counter("taskrt.tasks.enqueued", "Starts queued at the owner cap or the global limit (WithQueue).")
	if err == nil {
		in.queued, err = m.Int64UpDownCounter("taskrt.tasks.queued", metric.WithDescription("Tasks queued now, waiting for a slot."))
	}
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

// attrs returns the cached options for key, building them once.
func attrs[K comparable](in *instruments, m map[K]*attrOpts, key K, build func() []attribute.KeyValue) *attrOpts {
	in.mu.Lock()
	defer in.mu.Unlock()
	o, ok := m[key]
	if !ok {
		set := metric.WithAttributeSet(attribute.NewSet(build()...))
		o = &attrOpts{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
		m[key] = o
	}
	return o
}

func (in *instruments) kindAttrs(kind string) *attrOpts {
	return attrs(in, in.byKind, kind, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.String("kind", kind)} })
}

func (in *instruments) taskStarted(kind string) {
	if !in.on {
		return
	}
	in.started.Add(bg, 1, in.kindAttrs(kind).add...)
}

// taskQueued: a start was queued (its task is indexed with status queued).
func (in *instruments) taskQueued(kind string) {
	if !in.on {
		return
	}
	a := in.kindAttrs(kind).add
	in.enqueued.Add(bg, 1, a...)
	in.queued.Add(bg, 1, a...)
}

// queueLeft: a queued task left the queue, starting or settling.
func (in *instruments) queueLeft(kind string) {
	if !in.on {
		return
	}
	in.queued.Add(bg, -1, in.kindAttrs(kind).add...)
}

func (in *instruments) taskSettled(s messages.Snapshot) {
	if !in.on {
		return
	}
	a := attrs(in, in.byStatus, [2]string{s.Kind, string(s.Status)}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("kind", s.Kind), attribute.String("status", string(s.Status))}
	})
	in.settled.Add(bg, 1, a.add...)
	in.duration.Record(bg, s.Finished.Sub(s.Started).Seconds(), a.record...)
}

func (in *instruments) taskStopped(kind string, d time.Duration) {
	if !in.on {
		return
	}
	in.stopDuration.Record(bg, d.Seconds(), in.kindAttrs(kind).record...)
}

func (in *instruments) notice(result string) {
	if !in.on {
		return
	}
	a := attrs(in, in.byResult, result, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.String("result", result)} })
	in.notices.Add(bg, 1, a.add...)
}
