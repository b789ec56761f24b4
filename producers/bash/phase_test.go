package bash

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProgressPhase(t *testing.T) {
	steps := []phase{phaseExited, phaseSettled, phaseReaped, phaseReleased}
	tests := []struct {
		name  string
		reach []phase
		want  phase
	}{
		{"a new task is running", nil, phaseRunning},
		{"the steps in order end released", steps, phaseReleased},
		{"a phase reached again stays", []phase{phaseExited, phaseSettled, phaseSettled}, phaseSettled},
		{"phases never move back", []phase{phaseExited, phaseSettled, phaseExited}, phaseSettled},
		{"salvage past a failed reap ends released", []phase{phaseExited, phaseSettled, phaseReleased}, phaseReleased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pr progress
			for _, p := range tt.reach {
				pr.reach(p)
			}
			assert.Equal(t, tt.want, pr.phase)
			for _, p := range steps {
				assert.Equal(t, p <= tt.want, pr.done(p), "done(%d)", p)
			}
		})
	}
}
