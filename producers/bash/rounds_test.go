//go:build linux

package bash

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundsLoop is a loop over r as the sweeper and the reaper run one: each round
// is reported on batches and ends when end receives; every request is served by
// the round that takes it. It closes batches when it returns.
func roundsLoop(r *rounds[int], batches chan<- []int, end <-chan struct{}) func() {
	return func() {
		var active []int
		for {
			var ok bool
			if active, ok = r.next(active); !ok {
				close(batches)
				return
			}
			batches <- slices.Clone(active)
			<-end
			active = active[:0]
		}
	}
}

func TestRounds(t *testing.T) {
	t.Run("requests that join during a round are served together by the next one, and the loop ends when none is left", func(t *testing.T) {
		var r rounds[int]
		batches, end := make(chan []int), make(chan struct{})
		loop := roundsLoop(&r, batches, end)
		r.join(1, loop)
		got := [][]int{<-batches}
		r.join(2, loop) // the loop is inside its round
		r.join(3, loop)
		end <- struct{}{}
		got = append(got, <-batches)
		end <- struct{}{}
		_, open := <-batches
		assert.Equal(t, [][]int{{1}, {2, 3}}, got, "rounds")
		assert.False(t, open, "the loop ended")
	})
	t.Run("a request after the loop ended starts a new loop", func(t *testing.T) {
		var r rounds[int]
		first, end := make(chan []int), make(chan struct{})
		r.join(1, roundsLoop(&r, first, end))
		<-first
		end <- struct{}{}
		_, open := <-first
		require.False(t, open, "the first loop ended")
		second := make(chan []int)
		r.join(2, roundsLoop(&r, second, end))
		assert.Equal(t, []int{2}, <-second)
		end <- struct{}{}
		<-second
	})
	t.Run("a caller claims the rounds when no one runs them; requests meanwhile join the loop it hands off to, with its own", func(t *testing.T) {
		var r rounds[int]
		batches, end := make(chan []int), make(chan struct{})
		loop := roundsLoop(&r, batches, end)
		require.True(t, r.claim(1), "the first caller claims")
		assert.False(t, r.claim(2), "a caller while the first runs its round joins instead")
		r.join(3, loop) // no loop starts while the claim lasts
		r.handOff(loop, 1)
		assert.Equal(t, []int{2, 3, 1}, <-batches, "the loop's first round")
		end <- struct{}{}
		<-batches
	})
	t.Run("a hand-off with nothing pending ends the rounds: the next caller claims them", func(t *testing.T) {
		var r rounds[int]
		require.True(t, r.claim(1))
		r.handOff(func() { t.Error("a loop started with nothing to serve") })
		assert.True(t, r.claim(2), "the next caller claims")
		r.handOff(func() { t.Error("a loop started with nothing to serve") })
	})
	t.Run("a waiting loop wakes when a request joins", func(t *testing.T) {
		var r rounds[int]
		woke, end := make(chan []int), make(chan struct{})
		loop := func() {
			active, _ := r.next(nil)
			r.wait(time.Hour)
			active, _ = r.next(active)
			woke <- active
			<-end
			r.next(nil)
		}
		r.join(1, loop)
		r.join(2, loop)
		assert.Equal(t, []int{1, 2}, <-woke, "the requests after the wait")
		end <- struct{}{}
	})
}
