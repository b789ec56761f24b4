//go:build linux

package bash

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The execve-window survivor: a process of the task that has left the session and is
// in the middle of execve shows an empty environment for a while (first with an empty
// command line too, then, while the kernel copies the environment pointers, with its
// new command line already complete). Sweep mode must not take it for an `env -i`
// process without a marker and let it live. These tests widen that window with a large
// environment (50,000 entries) so that they hit it reliably.

// bigEnv is a large environment, to make execve's copying of it last.
func bigEnv(base []string) []string {
	env := append([]string(nil), base...)
	for i := range 50_000 {
		env = append(env, fmt.Sprintf("V%d=x", i))
	}
	return env
}

func init() {
	// exec-chain: exec itself with a large environment EXEC_LEFT more times, then
	// exit. Each execve has the window.
	testHelpers["exec-chain"] = func() {
		left, _ := strconv.Atoi(os.Getenv("EXEC_LEFT"))
		if left <= 0 {
			return
		}
		exe, err := os.Executable()
		if err != nil {
			os.Exit(1)
		}
		env := []string{helperEnv + "=exec-chain", "EXEC_LEFT=" + strconv.Itoa(left-1), markerEnv + "=" + os.Getenv(markerEnv)}
		_ = syscall.Exec(exe, []string{exe}, bigEnv(env))
		os.Exit(1)
	}
	// setsid-then-exec: leave the session, tell the leader through the FIFO $FIFO,
	// and exec $SLEEP with a large environment: the escape whose execve the sweep
	// must not misread.
	testHelpers["setsid-then-exec"] = func() {
		_, _ = syscall.Setsid()
		env := bigEnv(os.Environ())
		f, err := os.OpenFile(os.Getenv("FIFO"), os.O_WRONLY, 0)
		if err != nil {
			os.Exit(1)
		}
		_, _ = f.WriteString("go\n")
		_ = f.Close()
		_ = syscall.Exec("/bin/sleep", []string{"sleep", os.Getenv("SLEEP_FOR")}, env)
		os.Exit(1)
	}
}

// Every reading of the marker of a process caught inside execve is either its
// marker or "unsure"; never a sure "no marker", which is what let the escape live.
func TestAProcessInsideExecveIsNeverTakenForAnUnmarkedOne(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	const marker = "execwindow.test.1"
	cmd := exec.Command(exe)
	cmd.Env = []string{helperEnv + "=exec-chain", "EXEC_LEFT=20", markerEnv + "=" + marker}
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	// Reading a 50,000-entry environment takes long next to the window; stat is
	// cheap. So stat is sampled continuously, and the marker read whenever stat
	// shows a window (an empty environment, or a zombie leader with live threads)
	// and on every 64th sample otherwise.
	var sure, unsure, wrong, windows, samples int
	for {
		p, ok := readStat(pid)
		if !ok || p.zombie {
			break
		}
		samples++
		window := p.envStart == p.envEnd || p.state == 'Z'
		if window {
			windows++
		} else if samples%64 != 0 {
			continue
		}
		m, ok := markerOf(p)
		switch {
		case !ok:
			unsure++
		case m == marker:
			sure++
		default:
			wrong++
			t.Logf("wrong reading: state %c, %d threads, environment at %d-%d", p.state, p.threads, p.envStart, p.envEnd)
		}
	}
	require.NoError(t, cmd.Wait())
	t.Logf("%d stat samples, %d inside a window; readings: %d with the marker, %d unsure, %d wrong", samples, windows, sure, unsure, wrong)
	assert.Zero(t, wrong, "readings that found no marker on a marked process")
	assert.Positive(t, sure, "the marker was read at all")
	assert.Positive(t, windows, "the execve window was sampled (else the test proves nothing)")
}

// End to end: the leader exits while its escaped child is inside execve, at delays
// spread over the window; the sweep must find and kill the child every time.
// Without markerOf's stat check a survivor is left in about 4 of 60 runs on an idle
// machine.
func TestAnEscapeCaughtInsideExecveIsStillKilled(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	p := newTestProducer(t, WithContainment(SweepContainment))
	const runs = 40
	for i := range runs {
		fifo := filepath.Join(t.TempDir(), "fifo")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		sleep := uniqueSleep()
		h := startTask(t, p, Command{
			// The leader waits until the child left the session and starts its
			// execve, then lets 0 to 19 ms pass before it exits.
			Command: fmt.Sprintf(`%q & read -r _ < "$FIFO"; read -t 0.%03d <> <(:); exit 0`, exe, i%20),
			Env:     []string{helperEnv + "=setsid-then-exec", "FIFO=" + fifo, "SLEEP_FOR=" + sleep[len("sleep "):]},
		})
		o := h.awaitDone(t, settleLimit)
		h.Release()
		if pids := processesRunning(t, sleep); len(pids) > 0 {
			for _, pid := range pids {
				killAndReap(t, pid)
			}
			t.Fatalf("run %d (leader delay %d ms): the escaped child survived; outcome %s", i, i%20, o.Detail)
		}
		requireQuiet(t, p)
	}
}
