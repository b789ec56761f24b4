package messages_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTerminalStatuses(t *testing.T) {
	tests := []struct {
		status messages.Status
		want   bool
	}{
		{messages.Running, false},
		{messages.Stopping, false},
		{messages.Completed, true},
		{messages.Killed, true},
		{messages.Failed, true},
		{"", false},
		{"unknown", false},
	}
	for _, tc := range tests {
		t.Run(string(tc.status), func(t *testing.T) {
			assert.Equal(t, tc.want, tc.status.Terminal())
		})
	}
}

func TestKindPattern(t *testing.T) {
	for kind, want := range map[string]bool{
		"bash": true, "subagent": true, "dev_server": true, "job-2": true, "a": true,
		"": false, "Bash": false, "2bash": false, "bash!": false, "-x": false, "bash x": false,
	} {
		assert.Equal(t, want, messages.KindPattern().MatchString(kind), "kind %q", kind)
	}
}

func TestLimitError(t *testing.T) {
	err := error(&messages.LimitError{Limit: 10})
	assert.ErrorIs(t, err, messages.ErrOwnerLimit)
	assert.Equal(t, "background task limit reached for this owner (limit: 10)", err.Error())
	err = &messages.LimitError{Limit: 10, Stopping: 2}
	assert.Equal(t, "background task limit reached for this owner (limit: 10; 2 stopping)", err.Error())
}
