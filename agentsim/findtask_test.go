package agentsim

import (
	"testing"

	"github.com/taskrt/taskrt/messages"
)

// An expectation names a task by its id or as KIND@OWNER, the one task of that kind
// the agent started — the name for a task whose id depends on which of two racing
// starts committed first. A name that matches no settled task or more than one is
// an unmet expectation, never a guess.
func TestAnExpectationNamesATaskByIDOrByKindAndOwner(t *testing.T) {
	settled := []TaskInfo{ // in settle order
		{ID: "bash-3", Kind: "bash", Owner: "a1/sub-1/sub-2"},
		{ID: "subagent-1", Kind: "subagent", Owner: "a1/sub-1"},
		{ID: "bash-1", Kind: "bash", Owner: "a1"},
		{ID: "bash-2", Kind: "bash", Owner: "a1"},
		{ID: "subagent-2", Kind: "subagent", Owner: "a1"},
	}
	for _, c := range []struct {
		ref     messages.TaskID
		want    int
		wantErr string
	}{
		{ref: "bash-3", want: 0},
		{ref: "subagent-2", want: 4},
		{ref: "subagent@a1", want: 4},
		{ref: "subagent@a1/sub-1", want: 1},
		{ref: "bash@a1/sub-1/sub-2", want: 0},
		{ref: "bash@a1", want: -1, wantErr: "task bash@a1 names both bash-1 and bash-2"},
		{ref: "bash-9", want: -1, wantErr: "task bash-9 never settled"},
		{ref: "subagent@a2", want: -1, wantErr: "task subagent@a2 never settled"},
		{ref: "bash@", want: -1, wantErr: "task bash@ never settled"},
	} {
		t.Run(string(c.ref), func(t *testing.T) {
			got, err := findTask(settled, c.ref)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != c.want || gotErr != c.wantErr {
				t.Errorf("findTask(%q) = %d, %q; want %d, %q", c.ref, got, gotErr, c.want, c.wantErr)
			}
		})
	}
}

// The order rule of three-levels.json holds whichever of its two sub-agents got
// subagent-1: the expectations name them by owner.
func TestThreeLevelsExpectationsHoldForEitherIDOrder(t *testing.T) {
	sc := loadScenario(t, "scenarios/three-levels.json")
	for _, level2 := range []messages.TaskID{"subagent-1", "subagent-2"} {
		level3 := map[messages.TaskID]messages.TaskID{"subagent-1": "subagent-2", "subagent-2": "subagent-1"}[level2]
		t.Run("level 2 is "+string(level2), func(t *testing.T) {
			killed := func(id messages.TaskID, kind string, owner messages.AgentID, detail string) TaskInfo {
				return TaskInfo{ID: id, Kind: kind, Owner: owner, Status: messages.Killed, Detail: detail}
			}
			r := &Report{Tasks: []TaskInfo{ // deepest first, as disposal settles them
				killed("bash-3", "bash", "a1/sub-1/sub-2", "signal: SIGTERM"),
				killed(level3, "subagent", "a1/sub-1", "aborted: owner disposed"),
				killed("bash-2", "bash", "a1/sub-1", "signal: SIGTERM"),
				killed(level2, "subagent", "a1", "aborted: owner disposed"),
				killed("bash-1", "bash", "a1", "signal: SIGTERM"),
			}}
			e := sc.spec.Expect
			e.Stops, e.Statuses, e.Notices, e.ModelCalls, e.Transcript = nil, nil, nil, nil, nil
			if got := e.check(r); len(got) != 0 {
				t.Errorf("unmet: %v", got)
			}
			// The rule still bites: the level-2 task settling before the level-3 one.
			r.Tasks[1], r.Tasks[3] = r.Tasks[3], r.Tasks[1]
			if got := e.check(r); len(got) == 0 {
				t.Error("a level-2 task settled before its child's task passed the expectations")
			}
		})
	}
}
