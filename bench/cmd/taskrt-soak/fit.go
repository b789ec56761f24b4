package main

import (
	"fmt"
	"math"
	"time"
)

// resource is one sampled quantity and how much growth the soak tolerates.
type resource struct {
	name      string
	unit      float64 // the value is divided by it for display (1, or 1 MiB)
	unitName  string  // "" or "MiB"
	tolerance float64 // largest acceptable growth per minute, in units of unit
	value     func(sample) float64
}

// fit is the outcome of judging one resource over the samples after the warm-up.
type fit struct {
	resource
	start, end float64 // first and last sample after the warm-up, in units
	perMinute  float64 // least-squares growth per minute, in units
	samples    int     // how many samples were fitted
	ok         bool
}

// slope is the least-squares slope of ys over xs: the b of the line a + b·x that
// minimises the squared vertical distances. It is 0 for fewer than two points or
// when every x is the same.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		dx := xs[i] - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// judge fits every resource over the samples taken at or after warmup, and says
// which grew faster than it tolerates. With fewer than two such samples nothing can
// be fitted and every resource fails.
func judge(samples []sample, warmup time.Duration, resources []resource) []fit {
	var xs []float64
	var kept []sample
	for _, s := range samples {
		if s.at >= warmup {
			xs = append(xs, s.at.Minutes())
			kept = append(kept, s)
		}
	}
	fits := make([]fit, len(resources))
	for i, r := range resources {
		ys := make([]float64, len(kept))
		for j, s := range kept {
			ys[j] = r.value(s) / r.unit
		}
		f := fit{resource: r, samples: len(kept)}
		if len(kept) >= 2 {
			f.start, f.end = ys[0], ys[len(ys)-1]
			f.perMinute = slope(xs, ys)
			f.ok = f.perMinute <= r.tolerance && !math.IsNaN(f.perMinute)
		}
		fits[i] = f
	}
	return fits
}

// format renders a value of the fit's unit.
func (f fit) format(v float64) string {
	if f.unitName != "" {
		return fmt.Sprintf("%.2f %s", v, f.unitName)
	}
	return fmt.Sprintf("%.0f", v)
}

// formatRate renders a growth per minute.
func (f fit) formatRate(v float64) string {
	if f.unitName != "" {
		return fmt.Sprintf("%+.3f %s", v, f.unitName)
	}
	return fmt.Sprintf("%+.2f", v)
}
