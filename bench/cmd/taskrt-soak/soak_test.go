package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestShortSoakEndsClean plays the whole soak for a moment: the agents operate,
// samples are taken and fitted, the runtime is closed and nothing is left. The run
// is far too short to judge growth, so the fits' verdicts are not checked.
func TestShortSoakEndsClean(t *testing.T) {
	cfg := config{
		duration: 1500 * time.Millisecond,
		agents:   3,
		warmup:   0.2,
		rate:     20,
		interval: 150 * time.Millisecond,
		lifetime: 400 * time.Millisecond,
		prewarm:  1000,
		// However slow the machine, sample enough to fit: the run goes on until then.
		minSamples: 3,
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	rep, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.problems {
		t.Error(p)
	}
	if len(rep.samples) < cfg.minSamples {
		t.Errorf("%d samples in %s at one per %s", len(rep.samples), cfg.duration, cfg.interval)
	}
	if len(rep.fits) != len(resources) {
		t.Errorf("%d fits for %d resources", len(rep.fits), len(resources))
	}
	var out bytes.Buffer
	rep.write(&out)
	for _, want := range []string{"load ", "heap in use", "child processes", "after close  tasks 0, running 0, agents 0, actors 0, abandoned 0", "result "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestConfigCheck(t *testing.T) {
	good := config{duration: time.Minute, agents: 1, warmup: 0.2, rate: 1, interval: time.Second, lifetime: time.Second}
	tests := []struct {
		name   string
		modify func(*config)
		want   string
	}{
		{"the defaults are valid", func(*config) {}, ""},
		{"a zero duration is refused", func(c *config) { c.duration = 0 }, "must be positive"},
		{"no agents is refused", func(c *config) { c.agents = 0 }, "at least 1"},
		{"a warm-up of the whole run is refused", func(c *config) { c.warmup = 1 }, "-warmup"},
		{"an interval too short for its readings is refused", func(c *config) { c.interval = time.Millisecond }, "-interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.modify(&c)
			err := c.check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("check = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
