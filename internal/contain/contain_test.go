package contain_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskrt/taskrt/internal/contain"
	"github.com/taskrt/taskrt/messages"
)

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
			err := contain.Call("run", tc.f)
			require.Error(t, err)
			assert.Equal(t, tc.wantText, err.Error())
			if tc.wantIsErr != nil {
				assert.ErrorIs(t, err, tc.wantIsErr)
			}
			var pe *messages.PanicError
			if errors.As(err, &pe) {
				assert.Contains(t, string(pe.Stack), "contain_test.go", "the stack of the panic")
			}
		})
	}
	v, err := contain.Value("read", func() (string, error) { return "ok", nil })
	assert.Equal(t, "ok", v)
	assert.NoError(t, err)
}
