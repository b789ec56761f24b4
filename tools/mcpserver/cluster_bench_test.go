//go:build linux

package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkClusterCall measures a sessionless call (task_list of a scope with one
// running task) served by the scope's home ("home") and by another frontend that
// forwards it to the home over NATS ("forwarded"), on one embedded NATS server,
// both frontends in this process. It reports the median and the 99th percentile
// of the calls' latencies (as seen by an HTTP client on loopback):
//
//	go test -run '^$' -bench BenchmarkClusterCall -benchtime 2000x ./tools/mcpserver/
func BenchmarkClusterCall(b *testing.B) {
	ns := natsServer(b)
	fa, fb := newFrontend(b, ns, nil), newFrontend(b, ns, nil)
	hc := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(hc.CloseIdleConnections)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(url, tool, args string) string {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, tool, args, meta)
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(raw)
	}
	started := post(fa.hs.URL, "bash", `{"command":"sleep 600","run_in_background":true}`)
	i := strings.Index(started, `"scope":"`)
	if i < 0 {
		b.Fatalf("no scope in %s", started)
	}
	scope := started[i+9 : i+9+26]
	args := fmt.Sprintf(`{"scope":%q}`, scope)
	for _, bc := range []struct {
		name string
		url  string
	}{{"home", fa.hs.URL}, {"forwarded", fb.hs.URL}} {
		b.Run(bc.name, func(b *testing.B) {
			if got := post(bc.url, "task_list", args); !strings.Contains(got, "bash-1 [bash] running") {
				b.Fatalf("task_list at %s: %s", bc.name, got)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				post(bc.url, "task_list", args)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
	post(fa.hs.URL, "scope_close", args)
}

// BenchmarkClusterIdleScopes measures what an idle scope costs its home
// frontend: b.N scopes are minted on one frontend (each by a background `true`,
// which ends at once, so the scope is idle with one settled task), and the
// frontend's live heap after a GC is compared with the heap before. It reports
// the bytes per scope and the whole heap growth:
//
//	go test -run '^$' -bench BenchmarkClusterIdleScopes -benchtime 10000x ./tools/mcpserver/
func BenchmarkClusterIdleScopes(b *testing.B) {
	ns := natsServer(b)
	fa := newFrontend(b, ns, nil)
	hc := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(hc.CloseIdleConnections)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","run_in_background":true},%s}}`, meta)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, fa.hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "bash")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `"scope":"`) {
			b.Fatalf("no scope minted: %s", raw)
		}
	}
	b.StopTimer()
	hc.CloseIdleConnections()
	after := heap()
	grown := float64(after) - float64(before)
	b.ReportMetric(grown/float64(b.N), "heap-B/scope")
	b.ReportMetric(grown/(1<<20), "heap-MiB")
}
