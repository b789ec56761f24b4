package main

import (
	"math"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	tests := []struct {
		name   string
		xs, ys []float64
		want   float64
	}{
		{"a line has its own slope", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2},
		{"a flat series has none", []float64{0, 1, 2, 3}, []float64{4, 4, 4, 4}, 0},
		{"a falling series is negative", []float64{0, 0.5, 1}, []float64{10, 9, 8}, -2},
		{"symmetric noise around a flat line cancels", []float64{0, 1, 2, 3, 4}, []float64{1, 3, 2, 3, 1}, 0},
		{"noise around a line is fitted", []float64{0, 1, 2, 3}, []float64{1, 0, 3, 2}, 0.6},
		{"one point has no slope", []float64{1}, []float64{3}, 0},
		{"no spread in x has no slope", []float64{2, 2, 2}, []float64{1, 2, 3}, 0},
		{"mismatched lengths have no slope", []float64{0, 1}, []float64{1}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := slope(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("slope = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	// goroutines count thousandths here, so that rounding them does not bend the lines.
	count := resource{name: "count", unit: 1000, tolerance: 2, value: func(s sample) float64 { return float64(s.goroutines) }}
	heap := resource{name: "heap", unit: 1 << 20, unitName: "MiB", tolerance: 1, value: func(s sample) float64 { return float64(s.heap) }}
	// series makes one sample per second for two minutes: count(minutes) goroutines
	// and heap(minutes) MiB.
	series := func(count, heap func(min float64) float64) []sample {
		var out []sample
		for i := range 120 {
			at := time.Duration(i) * time.Second
			out = append(out, sample{at: at, goroutines: int(math.Round(1000 * count(at.Minutes()))), heap: uint64(heap(at.Minutes()) * (1 << 20))})
		}
		return out
	}
	line := func(start, perMin float64) func(float64) float64 {
		return func(m float64) float64 { return start + perMin*m }
	}
	tests := []struct {
		name     string
		samples  []sample
		warmup   time.Duration
		wantOK   [2]bool    // count, heap
		wantRate [2]float64 // per minute
	}{
		{"steady resources pass", series(line(40, 0), line(10, 0)), 0, [2]bool{true, true}, [2]float64{0, 0}},
		{"growth within the tolerance passes", series(line(40, 1.5), line(10, 0.5)), 0, [2]bool{true, true}, [2]float64{1.5, 0.5}},
		{"growth just under the tolerance passes", series(line(40, 1.95), line(10, 0.95)), 0, [2]bool{true, true}, [2]float64{1.95, 0.95}},
		{"growth just over the tolerance fails", series(line(40, 2.05), line(10, 1.05)), 0, [2]bool{false, false}, [2]float64{2.05, 1.05}},
		{"growth beyond the tolerance fails", series(line(40, 6), line(10, 3)), 0, [2]bool{false, false}, [2]float64{6, 3}},
		{"shrinking passes", series(line(100, -30), line(10, -2)), 0, [2]bool{true, true}, [2]float64{-30, -2}},
		{"growth during the warm-up is left out",
			series(func(m float64) float64 { return 40 + 30*min(m, 0.5) }, line(10, 0)), 30 * time.Second,
			[2]bool{true, true}, [2]float64{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fits := judge(tc.samples, tc.warmup, []resource{count, heap})
			for i, f := range fits {
				if f.ok != tc.wantOK[i] {
					t.Errorf("%s: ok = %v at %+.3f/min, want %v", f.name, f.ok, f.perMinute, tc.wantOK[i])
				}
				if math.Abs(f.perMinute-tc.wantRate[i]) > 0.01 {
					t.Errorf("%s: %+.3f/min, want %+.3f", f.name, f.perMinute, tc.wantRate[i])
				}
			}
		})
	}
	t.Run("the same growth without the warm-up fails", func(t *testing.T) {
		f := judge(series(func(m float64) float64 { return 40 + 30*min(m, 0.5) }, line(10, 0)), 0, []resource{count})[0]
		if f.ok {
			t.Errorf("passed at %+.3f/min", f.perMinute)
		}
	})
	t.Run("fewer than two samples fail every resource", func(t *testing.T) {
		for _, f := range judge(series(line(1, 0), line(1, 0))[:1], 0, []resource{count, heap}) {
			if f.ok {
				t.Errorf("%s passed on one sample", f.name)
			}
		}
	})
}
