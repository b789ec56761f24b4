package placement_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Three frontends numbering at once never give one number twice, and together
// give every number from 1 up: the cluster's numbering is one counter per kind.
func TestNextIDIsOneCounterPerKindAcrossFrontends(t *testing.T) {
	ns := natsServer(t)
	a, _ := join(t, ns)
	b, _ := join(t, ns)
	c, _ := join(t, ns)
	const each = 40
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for _, p := range []interface {
		NextID(context.Context, string) (int, error)
	}{a, b, c} {
		wg.Go(func() {
			for range each {
				n, err := p.NextID(context.Background(), "bash")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	want := make([]int, 3*each)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, got)
	n, err := a.NextID(context.Background(), "subagent")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "each kind counts on its own")
}
