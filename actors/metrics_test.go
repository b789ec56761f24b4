package actors_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/messages"
)

// sums flattens collected metrics: name{attr=value,…} → value (counters and gauges),
// and name:count for histograms.
func sums(t *testing.T, rm metricdata.ResourceMetrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+label(p.Attributes.ToSlice())] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+":count"] += float64(p.Count)
				}
			}
		}
	}
	return out
}

func label(kvs []attribute.KeyValue) string {
	if len(kvs) == 0 {
		return ""
	}
	s := "{"
	for i, kv := range kvs {
		if i > 0 {
			s += ","
		}
		s += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return s + "}"
}

// The metrics after a scripted run: one task completed and notified, one killed (its
// notice suppressed), the first evicted by retention, one abandoned at Close.
func TestMetricsAfterAScriptedRun(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(bg)) }()
	rt, err := actors.NewRuntime(actors.WithMeterProvider(mp), actors.WithRetention(1), actors.WithSettleTimeout(100*time.Millisecond))
	require.NoError(t, err)
	rt.Tasks().AttachSurface("test")
	notices := make(chan string, 4)
	require.NoError(t, rt.Agents().Register(bg, "a1", actors.WithInjector(func(_ context.Context, s string) error {
		notices <- s
		return nil
	})))
	handled := make(chan messages.TaskID, 8)
	stop := rt.Tasks().OnDone(func(s messages.Snapshot) {
		_, _ = rt.Tasks().Notify(bg, s.ID, "done "+string(s.ID))
		handled <- s.ID
	})
	defer stop()

	done := newFake()
	doneID := start(t, rt, done.spec("bash", "a1", true))
	done.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, doneID, <-handled)
	assert.Equal(t, "done "+string(doneID), <-notices)

	killed := newFake()
	killedID := start(t, rt, killed.spec("bash", "a1", true))
	_, _, err = rt.Tasks().Kill(bg, killedID, "a1", "stop")
	require.NoError(t, err)
	assert.Equal(t, killedID, <-handled)

	stuck := newFake()
	stuck.HoldCancel()
	start(t, rt, stuck.spec("bash", "", true))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(bg, &rm))
	before := sums(t, rm)
	assert.Equal(t, 1.0, before["taskrt.tasks.live"], "the stuck task")
	assert.Equal(t, 1.0, before["taskrt.agents.live"])
	assert.Equal(t, 1.0, before["taskrt.tasks.retained"], "retention 1")
	assert.Equal(t, 1.0, before["taskrt.tasks.tombstones"], "the first task, evicted")

	require.NoError(t, rt.Close(bg)) // the stuck task is abandoned after 100 ms
	require.NoError(t, reader.Collect(bg, &rm))
	got := sums(t, rm)
	for name, want := range map[string]float64{
		"taskrt.tasks.started{kind=bash}":                  3,
		"taskrt.tasks.settled{kind=bash,status=completed}": 1,
		"taskrt.tasks.settled{kind=bash,status=killed}":    1,
		"taskrt.tasks.settled{kind=bash,status=failed}":    1,
		"taskrt.task.duration:count":                       3,
		"taskrt.task.stop_duration:count":                  2,
		"taskrt.notices{result=delivered}":                 1,
		"taskrt.notices{result=suppressed}":                1,
		"taskrt.tasks.abandoned":                           1,
		"taskrt.tasks.evicted":                             1,
	} {
		assert.Equal(t, want, got[name], name)
	}
	t.Logf("metrics after the run: %v", got)
}

// A kill's stop is timed from the kill, also when the work settles while its Cancel
// runs (before the kill is accepted), and not at all when the Cancel fails and the
// task runs on.
func TestAKillIsTimedFromItsRequest(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(bg)) }()
	rt := newRT(t, actors.WithMeterProvider(mp))
	register(t, rt, "a1")
	settled := make(chan messages.TaskID, 4)
	defer rt.Tasks().OnDone(func(s messages.Snapshot) { settled <- s.ID })()
	stopCount := func() float64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(bg, &rm))
		return sums(t, rm)["taskrt.task.stop_duration:count"]
	}

	// The Cancel settles the work and returns only once the runtime has the
	// settlement: the outcome always comes before the kill is accepted.
	f := newFake()
	s := f.spec("bash", "a1", false)
	run := s.Run
	s.Run = func() (messages.Hooks, error) {
		h, err := run()
		h.Cancel = func(string) error {
			f.Finish(messages.Outcome{Status: messages.Killed, Detail: "signal: SIGTERM"})
			<-settled
			return nil
		}
		return h, err
	}
	id := start(t, rt, s)
	res, _, err := rt.Tasks().Kill(bg, id, "a1", "stop")
	require.NoError(t, err)
	assert.Equal(t, messages.KillRequested, res)
	assert.Equal(t, 1.0, stopCount(), "the kill that settled the work while its Cancel ran")

	failing := newFake()
	failing.FailCancel(errors.New("no"))
	id = start(t, rt, failing.spec("bash", "a1", false))
	_, _, err = rt.Tasks().Kill(bg, id, "a1", "stop")
	require.ErrorIs(t, err, messages.ErrCancelFailed)
	failing.Finish(messages.Outcome{Status: messages.Completed})
	assert.Equal(t, id, <-settled)
	assert.Equal(t, 1.0, stopCount(), "a task whose Cancel failed settled on its own: no stop")
}

// Recording metrics costs no allocation per task: none at all without a meter
// provider, and with the SDK's the attribute sets are built once and reused.
func TestRecordingMetricsDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mp   func() (metric.MeterProvider, func())
	}{
		{"without a meter provider nothing is recorded", func() (metric.MeterProvider, func()) { return nil, func() {} }},
		{"with the SDK's the attribute sets are reused", func() (metric.MeterProvider, func()) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			return mp, func() { _ = mp.Shutdown(context.Background()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp, stop := tc.mp()
			defer stop()
			got, err := actors.RecordingAllocs(mp)
			require.NoError(t, err)
			assert.Zero(t, got, "allocations per recorded lifecycle")
		})
	}
}

// Queued tasks in the metrics: taskrt.tasks.queued is how many wait now, by kind;
// taskrt.tasks.enqueued counts the starts that were queued; a queued task counts in
// taskrt.tasks.started only once it runs. The queue empties by a kill, by a slot
// freeing, and by the owner's disposal.
func TestMetricsShowQueuedTasks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { require.NoError(t, mp.Shutdown(bg)) }()
	rt := newRT(t, actors.WithMeterProvider(mp), actors.WithOwnerLimit(1), actors.WithQueue(3))
	register(t, rt, "a1")
	sub, err := rt.Subscribe(bg)
	require.NoError(t, err)
	defer sub.Close()
	// await reads events until it has seen kind for every id. The registry records
	// the metrics before it publishes the event.
	await := func(kind messages.EventKind, ids ...messages.TaskID) {
		t.Helper()
		want := map[messages.TaskID]bool{}
		for _, id := range ids {
			want[id] = true
		}
		for len(want) > 0 {
			ev := <-sub.Events()
			if ev.Kind == kind {
				delete(want, ev.Task.ID)
			}
		}
	}
	collect := func() map[string]float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(bg, &rm))
		return sums(t, rm)
	}
	type counts struct{ queuedBash, queuedAgent, enqueuedBash, enqueuedAgent, startedBash, startedAgent float64 }
	read := func() counts {
		got := collect()
		return counts{
			got["taskrt.tasks.queued{kind=bash}"], got["taskrt.tasks.queued{kind=agent}"],
			got["taskrt.tasks.enqueued{kind=bash}"], got["taskrt.tasks.enqueued{kind=agent}"],
			got["taskrt.tasks.started{kind=bash}"], got["taskrt.tasks.started{kind=agent}"],
		}
	}

	busy := newFake()
	busyID := start(t, rt, busy.spec("bash", "a1", true))
	await(messages.EventTaskStarted, busyID)
	agent, bash2, bash3 := newFake(), newFake(), newFake()
	agentID := start(t, rt, agent.spec("agent", "a1", true))
	bash2ID := start(t, rt, bash2.spec("bash", "a1", true))
	bash3ID := start(t, rt, bash3.spec("bash", "a1", true))
	await(messages.EventTaskQueued, agentID, bash2ID, bash3ID)
	assert.Equal(t, counts{queuedBash: 2, queuedAgent: 1, enqueuedBash: 2, enqueuedAgent: 1, startedBash: 1}, read(), "one running, three queued")

	_, _, err = rt.Tasks().Kill(bg, bash2ID, "a1", "not needed")
	require.NoError(t, err)
	await(messages.EventTaskSettled, bash2ID)
	assert.Equal(t, counts{queuedBash: 1, queuedAgent: 1, enqueuedBash: 2, enqueuedAgent: 1, startedBash: 1}, read(), "a kill takes a task out of the queue")

	busy.Finish(messages.Outcome{Status: messages.Completed})
	await(messages.EventTaskStarted, agentID)
	assert.Equal(t, counts{queuedBash: 1, enqueuedBash: 2, enqueuedAgent: 1, startedBash: 1, startedAgent: 1}, read(), "a freed slot starts the first queued, which counts as started then")

	require.NoError(t, rt.Agents().Dispose(bg, "a1"))
	await(messages.EventTaskSettled, agentID, bash3ID)
	assert.Equal(t, counts{enqueuedBash: 2, enqueuedAgent: 1, startedBash: 1, startedAgent: 1}, read(), "the owner's disposal drops what it had queued")
	assert.Zero(t, bash2.runs()+bash3.runs(), "the killed and the dropped never ran")
	assert.Equal(t, 2.0, collect()["taskrt.tasks.settled{kind=bash,status=killed}"], "the killed and the dropped settle killed")
}
