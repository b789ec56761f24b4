package actors

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/taskrt/taskrt/messages"
)

// WithRegistryHook calls hook on the registry's goroutine before it handles each
// message: fault injection for the registry's own panic containment.
func WithRegistryHook(hook func(msg any)) Option {
	return optionFunc(func(c *config) { c.registryHook = hook })
}

// WithAgentHook calls hook on an agent actor's goroutine before it handles each
// message: fault injection for the agent actor's panic containment.
func WithAgentHook(hook func(agent messages.AgentID, msg any)) Option {
	return optionFunc(func(c *config) { c.agentHook = hook })
}

// WithTaskHook calls hook on a task actor's goroutine as it handles each message —
// for Started, once the actor made its announcement to the registry (sent by the
// end of Started, with a settlement made meanwhile), before it takes an outcome
// already there and answers its starter: fault injection for the task actor's
// panic containment.
func WithTaskHook(hook func(task messages.TaskID, msg any)) Option {
	return optionFunc(func(c *config) { c.taskHook = hook })
}

// RecordingAllocs is the allocations per recorded task queueing, start, settlement,
// stop and notice, with the given meter provider (nil: none) and after a first recording of
// the same attributes.
func RecordingAllocs(mp metric.MeterProvider) (float64, error) {
	in, err := newInstruments(nil, mp)
	if err != nil {
		return 0, err
	}
	defer func() {
		if in.registration != nil {
			_ = in.registration.Unregister()
		}
	}()
	snap := messages.Snapshot{Kind: "bash", Status: messages.Completed, Started: time.Unix(1, 0), Finished: time.Unix(2, 0)}
	record := func() {
		in.taskQueued("bash")
		in.queueLeft("bash")
		in.taskStarted("bash")
		in.taskSettled(snap)
		in.taskStopped("bash", time.Millisecond)
		in.notice("delivered")
	}
	record()
	return testing.AllocsPerRun(100, record), nil
}

// WithRuleHook calls hook on a task actor's goroutine each time its transition
// applies a rule of the task machine, with the rule's name.
func WithRuleHook(hook func(task messages.TaskID, rule string)) Option {
	return optionFunc(func(c *config) { c.ruleHook = hook })
}

// TaskRules lists the rules of the task machine: each one's name, the phases it
// applies from and the phase it leads to.
func TaskRules() (rules []struct {
	Name string
	From []string
	To   string
}) {
	for _, r := range taskRules {
		var from []string
		for _, p := range r.from {
			from = append(from, p.String())
		}
		rules = append(rules, struct {
			Name string
			From []string
			To   string
		}{r.name, from, r.to.String()})
	}
	return rules
}
