package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/taskrt/taskrt/actors"
	"github.com/taskrt/taskrt/producers/bash"
	"github.com/taskrt/taskrt/producers/output"
)

// FuzzParseScenario feeds arbitrary bytes to ParseScenario. Whatever the input, it
// never panics; it returns either an error and no scenario, or a scenario that
// validates and survives a round trip: encoding it and parsing the encoding again
// gives the same encoding. The seed corpus (testdata/fuzz/FuzzParseScenario) holds
// the example scenarios of scenarios/ and a few malformed ones.
func FuzzParseScenario(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(bytes.NewReader(data))
		if err != nil {
			if sc != nil {
				t.Fatalf("error %q came with a scenario", err)
			}
			if !strings.HasPrefix(err.Error(), "invalid scenario: ") {
				t.Fatalf("error %q does not say the scenario is invalid", err)
			}
			return
		}
		if err := sc.validate(); err != nil {
			t.Fatalf("a parsed scenario does not validate: %v", err)
		}
		enc, err := json.Marshal(scenarioFile{sc, sc.spec})
		if err != nil {
			t.Fatalf("encoding a parsed scenario: %v", err)
		}
		again, err := ParseScenario(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("a parsed scenario, encoded, does not parse: %v\n%s", err, enc)
		}
		enc2, err := json.Marshal(scenarioFile{again, again.spec})
		if err != nil {
			t.Fatalf("encoding the scenario again: %v", err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the scenario:\n%s\n%s", enc, enc2)
		}
	})
}

// Bounds that keep one FuzzRunScript input cheap.
const (
	fuzzMaxScript = 8 << 10          // bytes of script
	fuzzMaxWait   = 20               // ms a sleep or a notices wait may take
	fuzzSlow      = 10 * time.Second // an input taking longer has found a hang
	fuzzBound     = 2 * time.Minute  // the context of one input
	fuzzShell     = "/bin/true"      // stands in for /bin/bash: no command really runs
)

// FuzzRunScript feeds arbitrary scripts to the script runner. Whatever the input:
// nothing panics, each non-blank input line yields exactly one output line, which is
// a JSON object whose op is the input's op when the line decodes, no tool reports an
// internal error, and after the Sim closes nothing is left: no task, agent, actor or
// process.
//
// The body must stay cheap and must not run what a fuzzed line asks for, so the Sim
// runs /bin/true as its shell (a bash call starts a real process, through the real
// producer, that exits at once with no output), the built-in "hang" model is
// replaced by one that answers at once, the Sims share one actor system, and inputs whose sleep or notices wait could
// take longer than fuzzMaxWait ms are skipped. The seed corpus
// (testdata/fuzz/FuzzRunScript) holds the example scripts of scripts/ (with their
// notice waits shortened) and TestScriptSurface's script.
//
// Fuzz it with a short minimisation:
//
//	go test -run='^$' -fuzz=FuzzRunScript -fuzztime=60s -fuzzminimizetime=50x ./agentsim/
//
// The coverage of a concurrent runtime differs from run to run, so the fuzzer takes
// many inputs for new ones, and with the default minimisation (up to 60 s each) it
// spends the whole time minimising them.
func FuzzRunScript(f *testing.F) {
	// One actor system for every input: creating one costs milliseconds (its
	// process registry), more than running most scripts. Each Sim's runtime still
	// stops its own actors on Close.
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	f.Cleanup(sys.Shutdown)
	answer := "${prompt}"
	opts := []Option{
		WithRuntimeOptions(actors.WithActorSystem(sys)),
		WithBashOptions(bash.WithShell(fuzzShell), bash.WithOutput(output.WithSpillDir(f.TempDir())), bash.WithoutGrace()),
		withScript("hang", modelScript{Steps: []scriptStep{{Answer: &answer}}}),
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > fuzzMaxScript || slowScript(script) {
			t.Skip("too long or too slow for a fuzz input")
		}
		sim, err := New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzBound)
		defer cancel()
		begin := time.Now()
		var out bytes.Buffer
		runErr := sim.runScript(ctx, bytes.NewReader(script), &out)
		closeErr := sim.Close(ctx)
		// Only while fuzzing: a seed input run by go test on a loaded machine may
		// well take long, and the context bounds a real hang anyway.
		if took := time.Since(begin); took > fuzzSlow && fuzzing() {
			t.Errorf("the script took %s", took)
		}
		if runErr != nil || closeErr != nil {
			t.Fatalf("run: %v; close: %v", runErr, closeErr)
		}
		checkScriptOutput(t, scriptLines(script), out.String())
		if st := sim.stats(); st != (Stats{}) {
			t.Errorf("Sim stats after Close = %+v, want zero", st)
		}
		if st := sim.Runtime().Stats(); st.Tasks != 0 || st.Running != 0 || st.Agents != 0 || st.Actors != 0 || st.Abandoned != 0 {
			t.Errorf("runtime stats after Close = %+v, want zero", st)
		}
	})
}

// fuzzing reports whether the test binary runs with -test.fuzz (fuzzing), rather
// than replaying the seed corpus as part of go test.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// scriptLines splits a script the way runScript does: its lines, trimmed, blank ones
// dropped (a line longer than maxScriptLine is kept, as nil: it is answered with an
// error).
func scriptLines(script []byte) [][]byte {
	var lines [][]byte
	for l := range bytes.Lines(script) {
		if len(bytes.TrimSuffix(l, []byte("\n"))) > maxScriptLine {
			lines = append(lines, nil)
			continue
		}
		if l = bytes.TrimSpace(l); len(l) > 0 {
			lines = append(lines, bytes.Clone(l))
		}
	}
	return lines
}

// decodeLine decodes one script line exactly as scriptRun.exec does; ok is false
// when exec would answer it with a malformed-line error.
func decodeLine(raw []byte) (l scriptLine, ok bool) {
	l, err := parseLine(raw)
	return l, err == nil
}

// slowScript reports whether a line may block for longer than fuzzMaxWait: a sleep
// longer than that, or a notices wait whose bound is longer (or the 10 s default).
func slowScript(script []byte) bool {
	for _, raw := range scriptLines(script) {
		l, ok := decodeLine(raw)
		if !ok {
			continue
		}
		// Only what would really block: out-of-range values are rejected at once.
		inRange := func(ms *int64, least int64) bool {
			return ms != nil && *ms >= least && *ms <= maxScriptDuration.Milliseconds()
		}
		switch {
		case l.Op == "sleep" && inRange(l.MS, 0) && *l.MS > fuzzMaxWait:
			return true
		case l.Op == "notices" && l.Wait != nil && *l.Wait > 0 && *l.Wait <= maxNoticeWait &&
			(l.TimeoutMS == nil || inRange(l.TimeoutMS, 1) && *l.TimeoutMS > fuzzMaxWait):
			return true
		}
	}
	return false
}

// checkScriptOutput checks the output of a script whose non-blank input lines are in.
func checkScriptOutput(t *testing.T, in [][]byte, out string) {
	t.Helper()
	var got []string
	if out != "" {
		if !strings.HasSuffix(out, "\n") {
			t.Errorf("the output does not end with a line break: %q", out)
		}
		got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	if len(got) != len(in) {
		t.Fatalf("%d input lines gave %d output lines:\n%s", len(in), len(got), out)
	}
	for i, line := range got {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Errorf("output line %d is not a JSON object: %v: %s", i+1, err, line)
			continue
		}
		op, hasOp := o["op"].(string)
		errText, hasErr := o["error"].(string)
		switch l, ok := decodeLine(in[i]); {
		case in[i] == nil:
			if !strings.HasPrefix(errText, "line is longer than ") {
				t.Errorf("line %d is too long, yet its answer is %s", i+1, line)
			}
		case !hasOp:
			t.Errorf("output line %d has no op: %s", i+1, line)
		case !ok && !hasErr:
			t.Errorf("line %d does not decode, yet its answer is no error: %s -> %s", i+1, in[i], line)
		case !ok && !strings.HasPrefix(errText, "malformed line: "):
			t.Errorf("line %d does not decode, yet its error is %q", i+1, errText)
		case ok && op != l.Op:
			t.Errorf("line %d has op %q, its answer %q: %s", i+1, l.Op, op, line)
		}
		if text, _ := o["text"].(string); strings.Contains(text, "internal error") {
			t.Errorf("line %d: a tool recovered a panic: %s -> %s", i+1, in[i], line)
		}
	}
}
