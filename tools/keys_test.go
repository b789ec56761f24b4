//go:build linux

package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/taskrt/taskrt/messages"
	"github.com/taskrt/taskrt/tools"
)

func TestBashStartKeys(t *testing.T) {
	t.Run("the key parameter is offered only with WithStartKeys", func(t *testing.T) {
		e := newEnv(t)
		p := newProducer(t)
		props := func(b *tools.BashTool) map[string]any { return b.Schema()["properties"].(map[string]any) }
		if _, ok := props(newBashTool(t, e.rt, p))["key"]; ok {
			t.Error("key is in the default schema")
		}
		if _, ok := props(newBashTool(t, e.rt, p, tools.WithStartKeys()))["key"]; !ok {
			t.Error("key is missing with WithStartKeys")
		}
		got := newBashTool(t, e.rt, p).Call(bg, "", json.RawMessage(`{"command":"true","run_in_background":true,"key":"k"}`))
		if want := (tools.Result{Text: `invalid arguments: unknown field "key"`, IsError: true}); got != want {
			t.Errorf("without WithStartKeys: got %+v, want %+v", got, want)
		}
	})
	t.Run("a retried start with the same key returns the same handle and starts nothing", func(t *testing.T) {
		p := newProducer(t)
		e := newEnv(t)
		e.agent(t, "a1", 8)
		b := newBashTool(t, e.rt, p, tools.WithStartKeys())
		args := json.RawMessage(`{"command":"sleep 60","run_in_background":true,"key":"dev-server"}`)
		first := b.Call(bg, "a1", args)
		retry := b.Call(bg, "a1", args)
		want := tools.Handle{Kind: "background", TaskID: "bash-1"}
		if first.Data != want || retry.Data != want || first.IsError || retry.IsError {
			t.Fatalf("first %+v, retry %+v: want both to carry %+v", first, retry, want)
		}
		if wantText := `background task bash-1 was already started with key "dev-server" (status: running); no new task was started. Read its output with task_output.`; retry.Text != wantText {
			t.Errorf("retry text %q, want %q", retry.Text, wantText)
		}
		list, err := e.rt.Tasks().List(bg, "a1")
		if err != nil || len(list) != 1 {
			t.Errorf("List = %v, %v: want one task", list, err)
		}
		other := b.Call(bg, "a1", json.RawMessage(`{"command":"true","run_in_background":true,"key":"other"}`))
		if other.Data != (tools.Handle{Kind: "background", TaskID: "bash-2"}) {
			t.Errorf("another key: got %+v, want bash-2 started", other)
		}
		if _, _, err := e.rt.Tasks().Kill(bg, "bash-1", "a1", "done"); err != nil {
			t.Fatal(err)
		}
		e.settled(t, "bash-1", "a1")
		e.settled(t, "bash-2", "a1")
		if s, err := e.rt.Tasks().Get(bg, "bash-1", "a1"); err != nil || s.Status != messages.Killed {
			t.Fatalf("bash-1: %+v, %v", s, err)
		}
		again := b.Call(bg, "a1", args)
		if again.Data != want || again.Text != `background task bash-1 was already started with key "dev-server" (status: killed); no new task was started. Read its output with task_output.` {
			t.Errorf("a retry after settlement (still retained): got %+v", again)
		}
	})
	t.Run("a key in the foreground is refused", func(t *testing.T) {
		e := newEnv(t)
		b := newBashTool(t, e.rt, newProducer(t), tools.WithStartKeys())
		got := b.Call(bg, "", json.RawMessage(`{"command":"true","key":"k"}`))
		if want := (tools.Result{Text: "invalid arguments: key needs run_in_background: true (it makes a background start idempotent)", IsError: true}); got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}
