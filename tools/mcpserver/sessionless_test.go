package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// sessionlessRPC is a 2026-07-28 client: no initialize, every request on its own
// (over HTTP, each POST without a session).
func sessionlessRPC(t *testing.T, srv *mcpserver.Server, open func(*testing.T, *mcpserver.Server) *rpc) *rpc {
	t.Helper()
	c := open(t, srv)
	c.sessionless = mcpserver.SessionlessVersion
	return c
}

// scoped is a sessionless tool result: its text items and structured content.
type scoped struct {
	texts      []string
	isError    bool
	structured map[string]any
}

func (c *rpc) scopedTool(name string, args map[string]any) scoped {
	c.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		c.t.Fatal(err)
	}
	var res struct {
		toolResult
		StructuredContent map[string]any `json:"structuredContent"`
	}
	c.ok("tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, b), &res)
	return scoped{texts: res.texts(), isError: res.IsError, structured: res.StructuredContent}
}

// startScoped starts a background command (in scope, or minting one when scope is
// "") and returns the task id and the scope.
func (c *rpc) startScoped(command, scope string) (string, string) {
	c.t.Helper()
	args := map[string]any{"command": command, "run_in_background": true}
	if scope != "" {
		args["scope"] = scope
	}
	r := c.scopedTool("bash", args)
	id, _ := r.structured["task_id"].(string)
	got, _ := r.structured["scope"].(string)
	if r.isError || id == "" || got == "" {
		c.t.Fatalf("background start = %q %v, want a task id and a scope", r.texts, r.structured)
	}
	if !strings.Contains(r.texts[0], "scope: "+got+" ") {
		c.t.Errorf("start text %q does not give the scope %s", r.texts[0], got)
	}
	return id, got
}

func TestSessionlessServed(t *testing.T) {
	for _, tr := range wires {
		t.Run(tr.name+"/server/discover names both eras", func(t *testing.T) {
			srv := newServer(t)
			c := sessionlessRPC(t, srv, tr.open)
			var res struct {
				SupportedVersions []string `json:"supportedVersions"`
			}
			c.ok("server/discover", `{}`, &res)
			for _, want := range []string{"2026-07-28", "2025-11-25"} {
				if !slices.Contains(res.SupportedVersions, want) {
					t.Errorf("supportedVersions = %q, want %s among them", res.SupportedVersions, want)
				}
			}
		})
	}
	t.Run("http/every task tool takes scope and states the policy; scope_close; sessions see neither", func(t *testing.T) {
		srv := newServer(t)
		c := sessionlessRPC(t, srv, httpWire)
		type tool struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"inputSchema"`
			Execution json.RawMessage `json:"execution"`
		}
		var list struct {
			Tools []tool `json:"tools"`
		}
		c.ok("tools/list", `{}`, &list)
		var names []string
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
			if _, ok := tl.InputSchema.Properties["scope"]; !ok {
				t.Errorf("tool %s has no scope parameter", tl.Name)
			}
			if !strings.Contains(tl.Description, "30m0s pass without a request naming it") {
				t.Errorf("tool %s description does not state the lease: %q", tl.Name, tl.Description)
			}
			// Claude Code is served this era: a model that drops scope loses its
			// notices, so every description says where they come.
			if !strings.Contains(tl.Description, "comes only on the result of a later call naming the scope") {
				t.Errorf("tool %s description does not say notices come only on calls naming the scope: %q", tl.Name, tl.Description)
			}
			if tl.Execution != nil {
				t.Errorf("tool %s has execution %s: 2025-11-25 tasks are not offered sessionless", tl.Name, tl.Execution)
			}
		}
		if !slices.Contains(names, mcpserver.ScopeCloseName) || !slices.Contains(names, "bash") {
			t.Errorf("tools = %q, want bash and %s among them", names, mcpserver.ScopeCloseName)
		}
		sess := session(t, srv, httpWire)
		var slist struct {
			Tools []tool `json:"tools"`
		}
		sess.ok("tools/list", `{}`, &slist)
		for _, tl := range slist.Tools {
			if _, ok := tl.InputSchema.Properties["scope"]; ok || tl.Name == mcpserver.ScopeCloseName || strings.Contains(tl.Description, "Sessionless") {
				t.Errorf("a session's tool %s shows the sessionless surface", tl.Name)
			}
		}
	})
	t.Run("stdio/the tools are the session's: no scope, no scope_close", func(t *testing.T) {
		srv := newServer(t)
		var sessionless, sess json.RawMessage
		sessionlessRPC(t, srv, stdioRPC).ok("tools/list", `{}`, &sessionless)
		old := stdioRPC(t, srv) // a revision without protocol tasks: bash is not marked for them
		old.initialize("2025-06-18")
		old.ok("tools/list", `{}`, &sess)
		var a, b struct {
			Tools json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(sessionless, &a) != nil || json.Unmarshal(sess, &b) != nil || string(a.Tools) != string(b.Tools) {
			t.Errorf("stdio tools/list of 2026-07-28 = %s, want the session's %s", a.Tools, b.Tools)
		}
		if strings.Contains(string(a.Tools), `"scope"`) || strings.Contains(string(a.Tools), mcpserver.ScopeCloseName) {
			t.Errorf("stdio tools/list asks for a scope: %s", a.Tools)
		}
	})
}

// httpWire opens a raw JSON-RPC client over HTTP: where scopes are needed.
func httpWire(t *testing.T, srv *mcpserver.Server) *rpc { return wires[1].open(t, srv) }

// TestSessionlessScopes pins scopes over HTTP, where nothing else tells two
// clients apart (on stdio: TestStdioNeedsNoHandle).
func TestSessionlessScopes(t *testing.T) {
	for _, tr := range wires[1:] {
		t.Run(tr.name+"/a scope is read in a later request, and no other scope reaches it", func(t *testing.T) {
			srv := newServer(t)
			c := sessionlessRPC(t, srv, tr.open)
			path := fifo(t)
			id, scope := c.startScoped(fmt.Sprintf("echo started; read l < %s; echo done $l", path), "")
			if id != "bash-1" || len(scope) < 26 {
				t.Errorf("start = %s, scope %q: want bash-1 and at least 128 random bits", id, scope)
			}
			later := sessionlessRPC(t, srv, tr.open) // an independent connection
			otherID, other := later.startScoped("sleep 600", "")
			if other == scope {
				t.Fatal("two starts without scope got the same scope")
			}
			notFound := later.scopedTool("task_output", map[string]any{"task_id": "bash-99", "scope": scope}).texts
			for name, args := range map[string]map[string]any{
				"another scope": {"task_id": id, "scope": other},
				"no scope":      {"task_id": id},
				"a made-up one": {"task_id": id, "scope": "AAAAAAAAAAAAAAAAAAAAAAAAAA"},
			} {
				got := later.scopedTool("task_output", args)
				want := strings.ReplaceAll(notFound[0], "bash-99", id)
				if !got.isError || !slices.Equal(got.texts, []string{want}) {
					t.Errorf("task_output with %s = %q, want %q, as for an unknown id", name, got.texts, want)
				}
				if kill := later.scopedTool("task_kill", args); !kill.isError {
					t.Errorf("task_kill with %s = %q, want not found", name, kill.texts)
				}
			}
			if got := later.scopedTool("task_list", map[string]any{"scope": other}).texts; !slices.Equal(got, []string{otherID + " [bash] running — sleep 600"}) {
				t.Errorf("task_list of the other scope = %q, want only its own task", got)
			}
			release(t, path, "ok")
			got := later.scopedTool("task_output", map[string]any{"task_id": id, "scope": scope, "wait": true})
			if want := []string{"started\ndone ok\n[status: completed, exit code: 0]"}; !slices.Equal(got.texts, want) {
				t.Errorf("task_output in a later request with the scope = %q, want %q", got.texts, want)
			}
			later.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": other})
		})

		t.Run(tr.name+"/a notice rides on the next result naming the scope, once", func(t *testing.T) {
			srv := newServer(t)
			c := sessionlessRPC(t, srv, tr.open)
			// The command waits for the test, so that its notice cannot ride on
			// the start's own result.
			path := fifo(t)
			cmd := fmt.Sprintf("read l < %s; echo $l", path)
			id, scope := c.startScoped(cmd, "")
			release(t, path, "quick")
			notice := "background task " + id + " (bash: " + cmd + ") finished [status: completed, exit code: 0]. Read its output with task_output."
			// The notice arrives when the task settles; until then a listing
			// carries none (and reading nothing, it marks nothing seen).
			deadline := time.Now().Add(time.Minute)
			for {
				got := c.scopedTool("task_list", map[string]any{"scope": scope}).texts
				if len(got) == 2 {
					if got[1] != notice {
						t.Errorf("notice = %q, want %q", got[1], notice)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no notice on a result naming the scope within a minute")
				}
				<-time.After(10 * time.Millisecond) // a model's next call
			}
			if got := c.scopedTool("task_list", map[string]any{"scope": scope}).texts; len(got) != 1 {
				t.Errorf("the next result = %q, want the notice only once", got)
			}
		})

		t.Run(tr.name+"/scope_close kills at once; the scope is gone", func(t *testing.T) {
			srv := newServer(t)
			c := sessionlessRPC(t, srv, tr.open)
			mark := newMark(t)
			_, scope := c.startScoped(marked(mark, "sleep 600"), "")
			awaitMarked(t, mark, 1)
			if r := c.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope}); r.isError {
				t.Fatalf("scope_close = %q", r.texts)
			}
			assertNoMarked(t, mark) // scope_close returns once every process is gone
			if got := c.scopedTool("task_list", map[string]any{"scope": scope}).texts; !slices.Equal(got, []string{"(no background tasks)"}) {
				t.Errorf("task_list of a closed scope = %q, want none", got)
			}
			r := c.scopedTool("bash", map[string]any{"command": "true", "run_in_background": true, "scope": scope})
			if want := "scope not found: " + scope; !r.isError || !strings.HasPrefix(r.texts[0], want) {
				t.Errorf("a start in a closed scope = %q, want %q…", r.texts, want)
			}
			if r := c.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope}); !r.isError {
				t.Errorf("closing it again = %q, want scope not found", r.texts)
			}
		})

		t.Run(tr.name+"/the lease lapses after the idle timeout: every process gone", func(t *testing.T) {
			srv := newServer(t, mcpserver.WithSessionTimeout(200*time.Millisecond))
			c := sessionlessRPC(t, srv, tr.open)
			mark := newMark(t)
			_, scope := c.startScoped(marked(mark, "sleep 600"), "")
			awaitGone(t, mark)
			r := c.scopedTool("bash", map[string]any{"command": "true", "run_in_background": true, "scope": scope})
			if !r.isError || !strings.HasPrefix(r.texts[0], "scope not found: "+scope) {
				t.Errorf("a start in a lapsed scope = %q, want scope not found", r.texts)
			}
		})

		t.Run(tr.name+"/the eras never reach each other's owners", func(t *testing.T) {
			srv := newServer(t)
			sess := session(t, srv, tr.open)
			sessID := sess.tool("bash", `{"command":"sleep 600","run_in_background":true}`)
			if len(sessID.texts()) != 1 || !strings.Contains(sessID.texts()[0], "bash-1") {
				t.Fatalf("session start = %q", sessID.texts())
			}
			c := sessionlessRPC(t, srv, tr.open)
			id, scope := c.startScoped("sleep 600", "")
			for _, args := range []map[string]any{{"task_id": "bash-1"}, {"task_id": "bash-1", "scope": scope}} {
				if r := c.scopedTool("task_output", args); !r.isError {
					t.Errorf("a sessionless request read the session's task: %q", r.texts)
				}
			}
			if got := c.scopedTool("task_list", map[string]any{"scope": scope}).texts; !slices.Equal(got, []string{id + " [bash] running — sleep 600"}) {
				t.Errorf("the scope lists %q, want only its own task", got)
			}
			if got := sess.tool("task_output", fmt.Sprintf(`{"task_id":%q}`, id)); !got.IsError {
				t.Errorf("the session read the scope's task: %q", got.texts())
			}
			if got := sess.tool("task_list", `{}`).texts(); !slices.Equal(got, []string{"bash-1 [bash] running — sleep 600"}) {
				t.Errorf("the session lists %q, want only its own task", got)
			}
		})
	}
}

// TestSessionlessScopeBoundToPrincipal pins the binding: behind token
// authentication that names a user (go-sdk's auth.RequireBearerToken), a scope
// minted for one user reads, for another, exactly like an unknown scope.
func TestSessionlessScopeBoundToPrincipal(t *testing.T) {
	srv := newServer(t)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != "alice" && token != "bob" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, auth.RequireBearerToken(verify, nil)(srv.HTTPHandler()))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	as := func(user string) *rpc {
		c := &rpc{t: t, http: newRaw(t, hs, user), sessionless: mcpserver.SessionlessVersion}
		return c
	}
	alice, bob := as("alice"), as("bob")
	mark := newMark(t)
	id, scope := alice.startScoped(marked(mark, "sleep 600"), "")
	awaitMarked(t, mark, 1)
	unknown := bob.scopedTool("task_output", map[string]any{"task_id": id, "scope": "AAAAAAAAAAAAAAAAAAAAAAAAAA"}).texts
	if got := bob.scopedTool("task_output", map[string]any{"task_id": id, "scope": scope}).texts; !slices.Equal(got, unknown) {
		t.Errorf("bob with alice's scope = %q, want %q, as with an unknown scope", got, unknown)
	}
	if r := bob.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope}); !r.isError {
		t.Errorf("bob closed alice's scope: %q", r.texts)
	}
	if got := alice.scopedTool("task_list", map[string]any{"scope": scope}).texts; !slices.Equal(got, []string{id + " [bash] running — " + marked(mark, "sleep 600")}) {
		t.Errorf("alice's own listing = %q", got)
	}
	alice.scopedTool(mcpserver.ScopeCloseName, map[string]any{"scope": scope})
	assertNoMarked(t, mark)
}
