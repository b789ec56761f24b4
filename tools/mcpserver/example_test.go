//go:build linux

package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskrt/taskrt/tools/mcpserver"
)

// A Server serves one session per transport; here an in-memory one, the way
// tests drive it. The command taskrt-mcp serves stdio (Serve with
// &mcp.StdioTransport{}) or HTTP (HTTPHandler).
func Example() {
	ctx := context.Background()
	srv, err := mcpserver.New()
	if err != nil {
		panic(err)
	}
	defer srv.Close(ctx)

	clientEnd, serverEnd := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, serverEnd) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil).Connect(ctx, clientEnd,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session: its owner owns the tasks
	if err != nil {
		panic(err)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "sleep 0.1; echo done", "run_in_background": true,
	}})
	if err != nil {
		panic(err)
	}
	// Programs read kind and task_id; message (and notices, when some are due)
	// are there for clients that show the model structuredContent instead of text.
	handle := res.StructuredContent.(map[string]any)
	fmt.Println(handle["kind"], handle["task_id"])
	fmt.Println(handle["message"])
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{
		"task_id": "bash-1", "wait": true,
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)

	cs.Close() // the session ends: its owner is disposed, its tasks are gone
	fmt.Println("Serve:", <-served)
	// Output:
	// background bash-1
	// started background task bash-1 (bash: sleep 0.1; echo done). You will be notified when it finishes; read its output with task_output.
	// done
	// [status: completed, exit code: 0]
	// Serve: <nil>
}
