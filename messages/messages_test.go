package messages_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestContainTurnsAPanicIntoAPanicErrorWithItsStack(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		f         func() error
		wantText  string
		wantIsErr error
	}{
		{"no panic: f's error", func() error { return boom }, "boom", boom},
		{"panic with a value", func() error { panic("kaboom") }, "run panicked: kaboom", nil},
		{"panic with an error unwraps to it", func() error { panic(boom) }, "run panicked: boom", boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := messages.Contain("run", tc.f)
			require.Error(t, err)
			assert.Equal(t, tc.wantText, err.Error())
			if tc.wantIsErr != nil {
				assert.ErrorIs(t, err, tc.wantIsErr)
			}
			var pe *messages.PanicError
			if errors.As(err, &pe) {
				assert.Contains(t, string(pe.Stack), "messages_test.go", "the stack of the panic")
			}
		})
	}
	v, err := messages.ContainValue("read", func() (string, error) { return "ok", nil })
	assert.Equal(t, "ok", v)
	assert.NoError(t, err)
}

func TestLimitError(t *testing.T) {
	err := error(&messages.LimitError{Limit: 10})
	assert.ErrorIs(t, err, messages.ErrOwnerLimit)
	assert.Equal(t, "background task limit reached for this owner (limit: 10)", err.Error())
	err = &messages.LimitError{Limit: 10, Stopping: 2}
	assert.Equal(t, "background task limit reached for this owner (limit: 10; 2 stopping)", err.Error())
}
