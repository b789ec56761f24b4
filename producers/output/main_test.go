package output

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/taskrt/taskrt/internal/outputtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// account checks one read result against the stream it came from (see
// outputtest.Account).
func account(t testing.TB, from int64, s string, source func(off int64) byte) (end, leftOut int64) {
	t.Helper()
	return outputtest.Account(t, from, s, source)
}
