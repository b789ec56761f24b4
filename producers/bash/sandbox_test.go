//go:build linux

package bash

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/producers/output"
)

// sandboxEnv, set to a sandbox mode's name, makes newTestProducer (and the host
// helper) sandbox every command: TestTheSuiteInsideTheSandbox re-runs the suite so.
const sandboxEnv = "TASKRT_BASH_TEST_SANDBOX"

// testSandbox is the option sandboxEnv asks for, or nil. In workspace-write the
// system's temporary directory is writable too, since the suite's commands write
// there (pid files of escapes, FIFOs).
func testSandbox() Option {
	mode, err := ParseSandboxMode(os.Getenv(sandboxEnv))
	if err != nil || mode == SandboxOff {
		return nil
	}
	s := Sandbox{Mode: mode}
	if mode == SandboxWorkspaceWrite {
		s.Writable = []string{os.TempDir()}
	}
	return WithSandbox(s)
}

// requireSandbox skips t when bwrap cannot build a sandbox on this machine (CI
// installs it: .ci/run).
func requireSandbox(t testing.TB) {
	t.Helper()
	if _, _, err := probeSandbox(defaultBwrap, defaultShell); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
}

// sandboxed starts command in a sandbox of p's own and returns its output, once it
// settled, with the outcome.
func sandboxed(t *testing.T, p *Producer, c Command) (string, messages.Outcome) {
	t.Helper()
	h := startTask(t, p, c)
	o := h.awaitDone(t, settleLimit)
	return h.ReadOutput(), o
}

// The filesystem: the system is readable; only the workspace (workspace-write),
// the Writable paths and a private /tmp are writable; any other write fails at
// once with the command's own "Read-only file system".
func TestSandboxFilesystem(t *testing.T) {
	requireSandbox(t)
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	type target struct {
		name string
		path func(ws, extra, other string) string // where the command writes
		ro   bool                                 // writable in read-only mode
		ww   bool                                 // writable in workspace-write mode
	}
	targets := []target{
		{"the workspace", func(ws, _, _ string) string { return ws }, false, true},
		{"a Writable path", func(_, extra, _ string) string { return extra }, false, true},
		{"/etc", func(string, string, string) string { return "/etc" }, false, false},
		{"$HOME", func(string, string, string) string { return home }, false, false},
		{"another directory", func(_, _, other string) string { return other }, false, false},
		{"/tmp", func(string, string, string) string { return "/tmp" }, true, true},
	}
	forEachMode(t, func(t *testing.T, mode Option) {
		for _, sm := range []SandboxMode{SandboxReadOnly, SandboxWorkspaceWrite} {
			for _, tg := range targets {
				writable := tg.ro
				if sm == SandboxWorkspaceWrite {
					writable = tg.ww
				}
				rule := "fails with Read-only file system"
				if writable {
					rule = "works"
				}
				t.Run("sandbox="+sm.String()+"/writing "+tg.name+" "+rule, func(t *testing.T) {
					// The workspace under /tmp (bound over the private /tmp), the others
					// outside it, so that they are visible in the sandbox.
					ws, extra, other := t.TempDir(), varTempDir(t), varTempDir(t)
					s := Sandbox{Mode: sm}
					if sm == SandboxWorkspaceWrite {
						s.Writable = []string{extra}
					}
					p := newTestProducer(t, mode)
					file := filepath.Join(tg.path(ws, extra, other), fmt.Sprintf("taskrt-sandbox-%d-%d", selfPid, sleeps.Add(1)))
					t.Cleanup(func() { _ = os.Remove(file) })
					out, o := sandboxed(t, p, Command{
						Command: fmt.Sprintf(`echo data > %q && cat %q`, file, file),
						Dir:     ws,
						Sandbox: &s,
					})
					_, statErr := os.Stat(file)
					switch {
					case !writable:
						assert.Equal(t, "exit code: 1", o.Detail)
						assert.Contains(t, out, "Read-only file system")
						assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing was written on the host")
					case tg.name == "/tmp":
						assert.Equal(t, "exit code: 0", o.Detail)
						assert.Equal(t, "data\n", out)
						assert.ErrorIs(t, statErr, os.ErrNotExist, "the sandbox's /tmp is its own")
					default:
						assert.Equal(t, "exit code: 0", o.Detail)
						assert.Equal(t, "data\n", out)
						assert.NoError(t, statErr, "written on the host")
					}
					requireQuiet(t, p)
				})
			}
			t.Run("sandbox="+sm.String()+"/reading the system works", func(t *testing.T) {
				p := newTestProducer(t, mode, WithSandbox(Sandbox{Mode: sm}))
				out, o := sandboxed(t, p, Command{Command: `head -c 5 /etc/passwd; echo; ls /usr/bin | grep -cx bash`, Dir: t.TempDir()})
				assert.Equal(t, "exit code: 0", o.Detail)
				assert.Equal(t, "root:\n1\n", out)
			})
		}
	})
}

// varTempDir is a directory under /var/tmp, outside /tmp (which the sandbox
// replaces), removed when t ends.
func varTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "taskrt-sandbox-test-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
	return dir
}

// The network: without Network, a connection to a listener on this host's
// loopback fails (the sandbox has a loopback of its own); with it, it connects.
func TestSandboxNetwork(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-accepted })
	port := ln.Addr().(*net.TCPAddr).Port
	command := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3`, port)
	forEachMode(t, func(t *testing.T, mode Option) {
		for _, sm := range []SandboxMode{SandboxReadOnly, SandboxWorkspaceWrite} {
			t.Run("sandbox="+sm.String()+"/without Network the host's loopback is unreachable", func(t *testing.T) {
				p := newTestProducer(t, mode, WithSandbox(Sandbox{Mode: sm}))
				out, o := sandboxed(t, p, Command{Command: command, Dir: t.TempDir()})
				assert.Equal(t, "exit code: 1", o.Detail)
				assert.Contains(t, out, "Connection refused")
				assert.NotContains(t, out, "hello")
			})
			t.Run("sandbox="+sm.String()+"/with Network the host's loopback is reachable", func(t *testing.T) {
				p := newTestProducer(t, mode, WithSandbox(Sandbox{Mode: sm, Network: true}))
				out, o := sandboxed(t, p, Command{Command: command, Dir: t.TempDir()})
				assert.Equal(t, "exit code: 0", o.Detail)
				assert.Equal(t, "hello from the host\n", out)
			})
		}
	})
}

// The command sees and signals only its own processes (a pid namespace), and its
// shell leads its own session and process group there.
func TestSandboxProcesses(t *testing.T) {
	requireSandbox(t)
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode, WithSandbox(Sandbox{Mode: SandboxWorkspaceWrite}))
		out, o := sandboxed(t, p, Command{
			Command: fmt.Sprintf(`kill -0 %d 2>/dev/null && echo sees the host || echo host hidden; [ "$(ps -o sid= $$)" -eq $$ ] && [ "$(ps -o pgid= $$)" -eq $$ ] && echo own session; ps -e -o comm= > /tmp/ps; sort /tmp/ps | tr '\n' ' '`, selfPid),
			Dir:     t.TempDir(),
		})
		assert.Equal(t, "exit code: 0", o.Detail)
		// ps runs alone (not in a pipeline whose other members may not have exec'd
		// yet and would show as bash): it sees the sandbox's init, the shell and itself.
		assert.Equal(t, "host hidden\nown session\nbash bwrap ps ", out, "the sandbox's init (bwrap), the shell and ps")
		requireQuiet(t, p)
	})
}

// A shell killed by a signal that taskrt did not send exits inside the sandbox;
// bwrap, the leader, reports it the way bash reports a killed command: exit code
// 128+N (the documented limit). A signal taskrt sends, and a memory limit's OOM
// kill, are still named (TestCancel, TestMemoryLimitStopsAHogAndNamesTheLimit in
// TestTheSuiteInsideTheSandbox).
func TestSandboxReportsAShellKilledFromInsideByItsExitCode(t *testing.T) {
	requireSandbox(t)
	p := newTestProducer(t, WithSandbox(Sandbox{Mode: SandboxReadOnly}))
	_, o := sandboxed(t, p, Command{Command: "kill -USR1 $$", Dir: t.TempDir()})
	assert.Equal(t, messages.Outcome{Status: messages.Completed, Detail: "exit code: " + strconv.Itoa(128+int(syscall.SIGUSR1))}, o)
}

// A sandbox that cannot be provided fails the start, and nothing runs: never an
// unsandboxed run.
func TestSandboxUnavailableStartsNothing(t *testing.T) {
	ws := t.TempDir()
	marker := filepath.Join(ws, "ran")
	command := Command{Command: "touch " + marker, Dir: ws}
	// What bwrap says where user namespaces are off, from a stand-in that says it.
	noUserns := filepath.Join(t.TempDir(), "bwrap")
	require.NoError(t, os.WriteFile(noUserns, []byte("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with '\\''sysctl kernel.unprivileged_userns_clone=1'\\''.' >&2\nexit 1\n"), 0o755))
	tests := []struct {
		name string
		opts []Option
		c    func(Command) Command
		want string
	}{
		{"a missing bwrap, as the producer's default", []Option{WithBwrap(filepath.Join(ws, "no-bwrap")), WithSandbox(Sandbox{Mode: SandboxWorkspaceWrite})},
			func(c Command) Command { return c }, "no bubblewrap"},
		{"a missing bwrap, asked for by the command", []Option{WithBwrap(filepath.Join(ws, "no-bwrap"))},
			func(c Command) Command { c.Sandbox = &Sandbox{Mode: SandboxReadOnly}; return c }, "no bubblewrap"},
		{"a bwrap that cannot build the sandbox", []Option{WithBwrap("/bin/false"), WithSandbox(Sandbox{Mode: SandboxReadOnly})},
			func(c Command) Command { return c }, "/bin/false cannot build a sandbox here: exit status 1"},
		{"no user namespaces", []Option{WithBwrap(noUserns), WithSandbox(Sandbox{Mode: SandboxWorkspaceWrite})},
			func(c Command) Command { return c }, noUserns + " cannot build a sandbox here: bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces."},
	}
	for _, tc := range tests {
		t.Run(tc.name+" fails the start", func(t *testing.T) {
			p := newTestProducer(t, tc.opts...)
			_, err := p.Start(tc.c(command))
			require.ErrorIs(t, err, ErrSandboxUnavailable)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
			_, err = p.Run(t.Context(), tc.c(command), time.Minute)
			require.ErrorIs(t, err, ErrSandboxUnavailable, "a foreground run too")
			assert.NoFileExists(t, marker, "nothing ran")
			requireQuiet(t, p)
		})
	}
	t.Run("the embedder may turn the sandbox off for one command", func(t *testing.T) {
		p := newTestProducer(t, WithBwrap(filepath.Join(ws, "no-bwrap")), WithSandbox(Sandbox{Mode: SandboxReadOnly}))
		c := command
		c.Sandbox = &Sandbox{}
		res, err := p.Run(t.Context(), c, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, "exit code: 0", res.Outcome.Detail)
		assert.FileExists(t, marker)
	})
}

// A malformed sandbox fails the start with errSandbox, before anything runs.
func TestMalformedSandboxesStartNothing(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	tests := []struct {
		name string
		s    Sandbox
		dir  string
		want string
	}{
		{"writable paths in read-only mode", Sandbox{Mode: SandboxReadOnly, Writable: []string{ws}}, ws, "writable paths need workspace-write"},
		{"a missing writable path", Sandbox{Mode: SandboxWorkspaceWrite, Writable: []string{"missing"}}, ws, "missing: no such file or directory"},
		{"the root directory as the workspace", Sandbox{Mode: SandboxWorkspaceWrite}, "/", "/ is the root directory"},
		{"the root directory as a writable path", Sandbox{Mode: SandboxWorkspaceWrite, Writable: []string{"/usr/.."}}, ws, "/usr/.. is the root directory"},
		{"an unknown mode", Sandbox{Mode: 7}, ws, "unknown mode SandboxMode(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProducer(t)
			marker := filepath.Join(ws, "ran")
			_, err := p.Start(Command{Command: "touch " + marker, Dir: tc.dir, Sandbox: &tc.s})
			require.ErrorIs(t, err, errSandbox)
			assert.Contains(t, err.Error(), tc.want)
			assert.NoFileExists(t, marker)
			requireQuiet(t, p)
		})
	}
}

// The Producer reports its sandbox as it does its containment mode.
func TestProducerReportsItsSandbox(t *testing.T) {
	requireSandbox(t)
	path, err := exec.LookPath(defaultBwrap)
	require.NoError(t, err)
	tests := []struct {
		name       string
		opts       []Option
		want       string
		wantDetail string
	}{
		{"none by default", nil, "off", "no sandbox"},
		{"workspace-write without network", []Option{WithSandbox(Sandbox{Mode: SandboxWorkspaceWrite, Writable: []string{"/var/cache"}})},
			"workspace-write, 1 writable path",
			"bwrap at " + path + ": the filesystem is read-only except the working directory and /var/cache and a private /tmp; no network (loopback of its own only)"},
		{"read-only with network", []Option{WithSandbox(Sandbox{Mode: SandboxReadOnly, Network: true})},
			"read-only, network", "bwrap at " + path + ": the filesystem is read-only except a private /tmp; the network is this host's"},
		{"unavailable", []Option{WithBwrap("/nonexistent/bwrap"), WithSandbox(Sandbox{Mode: SandboxReadOnly})},
			"read-only", "bash: sandbox unavailable: no bubblewrap: exec: \"/nonexistent/bwrap\": stat /nonexistent/bwrap: no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.opts...)
			assert.Equal(t, tc.want, p.Sandbox().String())
			assert.Equal(t, tc.wantDetail, p.SandboxDetail())
		})
	}
	t.Run("a producer without a default names bwrap once a command asked for a sandbox", func(t *testing.T) {
		p := newTestProducer(t)
		_, o := sandboxed(t, p, Command{Command: "true", Dir: t.TempDir(), Sandbox: &Sandbox{Mode: SandboxReadOnly}})
		assert.Equal(t, "exit code: 0", o.Detail)
		assert.Equal(t, "no sandbox; bwrap at "+path+" for the commands that ask for one", p.SandboxDetail())
	})
	t.Run("the modes parse from their names", func(t *testing.T) {
		for _, m := range []SandboxMode{SandboxOff, SandboxReadOnly, SandboxWorkspaceWrite} {
			got, err := ParseSandboxMode(m.String())
			require.NoError(t, err)
			assert.Equal(t, m, got)
		}
		_, err := ParseSandboxMode("full")
		assert.ErrorIs(t, err, errSandbox)
	})
}

// insideTheSandbox lists the tests TestTheSuiteInsideTheSandbox re-runs, per
// sandbox mode: in workspace-write (with the temporary directory writable) the
// process machinery of the whole suite — exit statuses but a signal from inside
// (TestSandboxReportsAShellKilledFromInsideByItsExitCode), cancel and grace,
// every escape and no-survivor test, foreground runs, pipe and terminal input,
// output bounds, limits; in read-only, whose processes run the same way and whose
// mounts TestSandboxFilesystem pins, a few quick ones whose commands write nothing
// outside /tmp (the suite is long under -race on a loaded machine). Not re-run: what the sandbox changes on purpose — host death
// (TestSandboxHostDeath), sweep mode's blind spot (a sandbox has none), leftovers
// counted in the detail (they die with the sandbox, uncounted), the /proc-level
// race tests of the unsandboxed spawn.
var insideTheSandbox = map[SandboxMode][]string{
	SandboxWorkspaceWrite: {
		"TestCancel", "TestCancelDoesNotBlock", "TestNoSurvivors", "TestEscapesLeaveNothing",
		"TestNoSurvivorsInEveryStdinMode",
		"TestForegroundRun", "TestPipeStdin", "TestTTYStdin", "TestInputAfterTheShellExitedFails",
		"TestAWriteBlockedOnAFullPipeReturnsWhenTheTaskIsKilled", "TestConcurrentInputsAreWrittenWhole",
		"TestCommandsHaveNoTerminalAndTheirOwnProcessGroup", "TestWorkingDirectoryAndEnvironment",
		"TestIncrementalReadsConcatenateToTheFullOutput", "TestFloodKeepsMemoryBoundedAndCountsDroppedBytesExactly",
		"TestFloodCancelledMidway", "TestCommandSizes", "TestManyConcurrentShortCommands",
		"TestProcessLimitStopsAForkBomb", "TestMemoryLimitStopsAHogAndNamesTheLimit", "TestCPULimitThrottlesABusyLoop",
		"TestWithoutGraceKillsATermIgnoringCommand", "TestAnInternalPanicFailsTheTaskAndStillLeavesNothing",
	},
	SandboxReadOnly: {
		"TestCancel", "TestForegroundRun", "TestTTYStdin", "TestCommandsHaveNoTerminalAndTheirOwnProcessGroup",
	},
}

// insideTheSandboxSkip are the subtests TestTheSuiteInsideTheSandbox skips: inside
// a sandbox the terminal's name is /dev/console (bwrap's /dev binds the terminal
// there), not its /dev/pts path; it is the same terminal.
const insideTheSandboxSkip = "^TestTTYStdin$/^tty_prints_a_/dev/pts_path$"

// The suite's own process tests pass with every command sandboxed: the test
// binary re-runs them with sandboxEnv set, so each keeps its exact assertions
// (no survivor, no zombie, no cgroup left, the same outcomes and output).
func TestTheSuiteInsideTheSandbox(t *testing.T) {
	requireSandbox(t)
	if os.Getenv(sandboxEnv) != "" {
		t.Skip("already inside")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, sm := range []SandboxMode{SandboxWorkspaceWrite, SandboxReadOnly} {
		t.Run("sandbox="+sm.String(), func(t *testing.T) {
			run := "^(" + strings.Join(insideTheSandbox[sm], "|") + ")$"
			cmd := exec.Command(exe, "-test.run", run, "-test.skip", insideTheSandboxSkip, "-test.count", "1", "-test.v")
			cmd.Env = append(os.Environ(), sandboxEnv+"="+sm.String())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the suite failed inside the sandbox: %v\n%s", err, out)
			}
			for _, name := range insideTheSandbox[sm] {
				assert.Contains(t, string(out), "--- PASS: "+name+" ", "%s ran and passed", name)
			}
			assert.NotContains(t, string(out), "--- SKIP", "nothing skipped")
		})
	}
}

// When the host dies, its sandboxed task dies whole at once: the leader (bwrap)
// by its parent-death signal, the sandbox's init by --die-with-parent, and every
// process of the sandbox with its pid namespace — a background job and a setsid
// escape included, in both modes, without waiting for the next New (compare
// TestHostDeath).
func TestSandboxHostDeath(t *testing.T) {
	requireSandbox(t)
	require.NoError(t, enableSubreaper())
	forEachMode(t, func(t *testing.T, mode Option) {
		containment := New(mode).Containment()
		var root string
		if containment == CgroupContainment {
			root = filepath.Join(New(mode).tree.root, fmt.Sprintf("hostdeath-%d-%d", selfPid, sleeps.Add(1)))
			require.NoError(t, os.Mkdir(root, 0o755))
			t.Cleanup(func() { assert.NoError(t, removeTree(root)) })
		}
		exe, err := os.Executable()
		require.NoError(t, err)
		bg, escaped := uniqueSleep(), uniqueSleep()
		host := exec.Command(exe)
		host.Env = append(os.Environ(), helperEnv+"=host", "HOST_MODE="+containment.String(), "HOST_CGROUP_ROOT="+root,
			sandboxEnv+"=workspace-write", "HOST_COMMAND="+bg+" & setsid "+escaped+" & echo started; wait")
		out, err := host.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, host.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "started\n", line)
		pids := awaitRunning(t, bg, escaped)
		leader := childrenOf(t, host.Process.Pid)
		require.Len(t, leader, 1, "the host's task: its bwrap")
		init := childrenOf(t, leader[0])
		require.Len(t, init, 1, "bwrap's child: the sandbox's init")
		var fds []unix.PollFd
		for _, pid := range pids {
			fd, err := unix.PidfdOpen(pid, 0)
			require.NoError(t, err)
			t.Cleanup(func() { unix.Close(fd) })
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}

		require.NoError(t, host.Process.Kill())
		require.Error(t, host.Wait())
		assert.Equal(t, syscall.SIGKILL, reap(t, leader[0]), "the leader died of its parent-death signal")
		assert.Equal(t, syscall.SIGKILL, reap(t, init[0]), "the sandbox's init died with its parent")
		awaitExits(t, fds)
		for _, cmd := range []string{bg, escaped} {
			assert.Empty(t, processesRunning(t, cmd), "%q died with the sandbox", cmd)
		}
	})
}

// childrenOf lists the children of pid, from /proc/PID/task/*/children.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	threads, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	require.NoError(t, err)
	var kids []int
	for _, f := range threads {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, s := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			kids = append(kids, n)
		}
	}
	return kids
}

// awaitExits waits until every pidfd reports its process's exit.
func awaitExits(t *testing.T, fds []unix.PollFd) {
	t.Helper()
	deadline := time.Now().Add(settleLimit)
	for _, fd := range fds {
		for {
			pfd := []unix.PollFd{fd}
			n, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds()))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			require.NoError(t, err)
			require.Equal(t, 1, n, "a process of the sandbox outlived the host by %s", settleLimit)
			break
		}
	}
}

// A relative working directory is the workspace too, resolved against this
// process's.
func TestSandboxRelativeWorkingDirectory(t *testing.T) {
	requireSandbox(t)
	wd, err := os.Getwd()
	require.NoError(t, err)
	ws, err := os.MkdirTemp(wd, "sandbox-ws-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(ws)) })
	p := newTestProducer(t, WithSandbox(Sandbox{Mode: SandboxWorkspaceWrite}))
	out, o := sandboxed(t, p, Command{Command: "pwd; echo x > f && cat f", Dir: filepath.Base(ws)})
	assert.Equal(t, "exit code: 0", o.Detail)
	assert.Equal(t, ws+"\nx\n", out)
}

// TMPDIR is the private /tmp inside a sandbox, whatever this process's, unless the
// command sets its own.
func TestSandboxTMPDIR(t *testing.T) {
	requireSandbox(t)
	t.Setenv("TMPDIR", "/var/tmp")
	p := newTestProducer(t, WithSandbox(Sandbox{Mode: SandboxReadOnly}))
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"this process's is replaced", nil, "/tmp\n"},
		{"the command's own is kept", []string{"TMPDIR=/tmp/own"}, "/tmp/own\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, o := sandboxed(t, p, Command{Command: `echo "$TMPDIR"`, Dir: t.TempDir(), Env: tc.env})
			assert.Equal(t, "exit code: 0", o.Detail)
			assert.Equal(t, tc.want, out)
		})
	}
}

// BenchmarkSandboxTrue is one /bin/true per iteration through Start and Done, per
// containment mode, without a sandbox and in each sandbox mode, so that benchstat
// can compare the columns (make bench has the same comparison as a table row).
func BenchmarkSandboxTrue(b *testing.B) {
	if _, _, err := probeSandbox(defaultBwrap, defaultShell); err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	for _, mode := range []Containment{CgroupContainment, SweepContainment} {
		for _, sm := range []SandboxMode{SandboxOff, SandboxReadOnly, SandboxWorkspaceWrite} {
			b.Run("mode="+mode.String()+"/sandbox="+sm.String(), func(b *testing.B) {
				p := New(WithOutput(output.WithSpillDir(b.TempDir())), WithContainment(mode), WithSandbox(Sandbox{Mode: sm}))
				if p.startErr != nil {
					b.Skip(p.startErr)
				}
				dir := b.TempDir()
				for b.Loop() {
					h, err := p.Start(Command{Command: "/bin/true", Dir: dir})
					if err != nil {
						b.Fatal(err)
					}
					if o := <-h.Done; o.Detail != "exit code: 0" {
						b.Fatalf("outcome %+v", o)
					}
					h.Release()
				}
			})
		}
	}
}

// Once a sandboxed task has settled, nothing of its sandbox is alive: not the
// processes its shell left (and not the sandbox's init, which the kernel lets
// finish last, after the task's cgroup is already empty: settle waits for it). Run a few times per mode: the window between the
// cgroup's emptying and the init's exit is short; the escape tests inside the
// sandbox (a 127-process fork bomb) hit it under load before settle waited for the
// init.
func TestNothingOfTheSandboxOutlivesDone(t *testing.T) {
	requireSandbox(t)
	forEachMode(t, func(t *testing.T, mode Option) {
		p := newTestProducer(t, mode, WithSandbox(Sandbox{Mode: SandboxReadOnly}))
		for i := range 3 {
			// Each background process reports its pid and start time; with the
			// namespace, that is its identity (aliveInNamespace).
			h := startTask(t, p, Command{
				Command: `readlink /proc/self/ns/pid; for i in $(seq 10); do sleep 1000 & echo "$! $(cut -d" " -f22 /proc/$!/stat)"; done; setsid sleep 1000 & echo "$! $(cut -d" " -f22 /proc/$!/stat)"`,
				Dir:     t.TempDir(),
			})
			o := h.awaitDone(t, settleLimit)
			require.Equal(t, "exit code: 0", o.Detail, "run %d", i)
			lines := strings.Split(strings.TrimSpace(h.ReadOutput()), "\n")
			require.Len(t, lines, 12, "run %d", i)
			ns := lines[0]
			require.True(t, strings.HasPrefix(ns, "pid:["), "run %d: %q", i, ns)
			for _, l := range lines[1:] {
				var pid int
				var start uint64
				_, err := fmt.Sscanf(l, "%d %d", &pid, &start)
				require.NoError(t, err, "run %d: %q", i, l)
				require.Zero(t, aliveInNamespace(t, ns, pid, start), "run %d: process %d of the settled task's sandbox is alive", i, pid)
			}
			requireQuiet(t, p)
		}
	})
}
