package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// go-sdk v1.8.0 does not model protocol-level tasks: its decoder of tools/call
// params drops params.task, and a ServerSession cannot send a notification of a
// method the SDK does not know. What taskrt needs of them is carried around the
// SDK, below its decoder:
//
//   - on the wire in, a tools/call's params.task is moved to
//     params._meta[metaTask], which the SDK keeps, and an initialize request that
//     came over HTTP is stamped with params._meta[metaStream] = "http", so the
//     session knows its transport can carry tasks (a stdio connection's owner
//     knows its stream); a client's own values of either key are dropped first,
//     so none can be forged;
//   - on the wire out (stdio), a stream's writer is shared, under one lock, by the
//     SDK and the session's notifications/tasks/status messages.
//
// This happens for the transports the Server itself reads: stdio (mcp.StdioTransport
// and mcp.IOTransport, wrapped by Connect) and streamable HTTP (HTTPHandler). A
// session on any other transport is served as before, without protocol tasks.
const (
	metaTask   = "taskrt/task"   // the params.task of a task-augmented tools/call
	metaStream = "taskrt/stream" // on an initialize over HTTP: streamHTTP
	streamHTTP = "http"
)

// maxCarriedLine bounds the stdio lines that are inspected: a longer line is
// passed on untouched (the SDK's own line limit applies to it).
const maxCarriedLine = 1 << 20

// carry rewrites one JSON-RPC message, or a batch, as described above; stamp is
// what an initialize request is stamped with ("" for none). A message it does
// not understand is returned unchanged, for the SDK to answer.
func carry(msg []byte, stamp string) []byte {
	trimmed := bytes.TrimSpace(msg)
	if !bytes.Contains(trimmed, []byte(`"tools/call"`)) && !bytes.Contains(trimmed, []byte(`"initialize"`)) {
		return msg
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return msg
		}
		for i, m := range batch {
			batch[i] = carryOne(m, stamp)
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return msg
		}
		return out
	}
	return carryOne(trimmed, stamp)
}

func carryOne(msg []byte, stamp string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil || (method != "tools/call" && method != "initialize") {
		return msg
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(m["params"], &params) != nil || params == nil {
		return msg
	}
	var meta map[string]json.RawMessage
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return msg
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	delete(meta, metaTask)
	delete(meta, metaStream)
	switch method {
	case "tools/call":
		if task, ok := params["task"]; ok {
			meta[metaTask] = task
			delete(params, "task")
		}
	case "initialize":
		if stamp != "" {
			meta[metaStream], _ = json.Marshal(stamp)
		}
	}
	if len(meta) == 0 {
		delete(params, "_meta")
	} else {
		params["_meta"], _ = json.Marshal(meta)
	}
	var err error
	if m["params"], err = json.Marshal(params); err != nil {
		return msg
	}
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}

// stream is one stdio connection as the Server reads and writes it: its reader
// carries task params past the SDK's decoder, its writer is shared by the SDK and
// the task status notifications.
type stream struct {
	r  *bufio.Reader
	rc io.ReadCloser

	wmu sync.Mutex // serializes writes: one message per Write, never interleaved
	w   io.WriteCloser

	pending []byte // the rest of the line being read
	long    bool   // the line being read is longer than maxCarriedLine: passed on as is
}

func newStream(r io.ReadCloser, w io.WriteCloser) *stream {
	return &stream{r: bufio.NewReaderSize(r, maxCarriedLine), rc: r, w: w}
}

// carrier is the transport the SDK connects over: an IOTransport on the stream.
func (st *stream) transport(maxLine int) mcp.Transport {
	return &mcp.IOTransport{Reader: streamReader{st}, Writer: streamWriter{st}, MaxLineLength: maxLine}
}

type streamReader struct{ st *stream }

func (r streamReader) Read(p []byte) (int, error) { return r.st.read(p) }
func (r streamReader) Close() error               { return r.st.rc.Close() }

type streamWriter struct{ st *stream }

func (w streamWriter) Write(p []byte) (int, error) {
	w.st.wmu.Lock()
	defer w.st.wmu.Unlock()
	return w.st.w.Write(p)
}
func (w streamWriter) Close() error { return w.st.w.Close() }

// read serves the input line by line, each line carried (see carry) when it is
// short enough to inspect.
func (st *stream) read(p []byte) (int, error) {
	for len(st.pending) == 0 {
		line, err := st.r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			st.long = true
			st.pending = append(st.pending[:0], line...)
		case st.long:
			st.long = false
			st.pending = append(st.pending[:0], line...)
		case len(line) > 0:
			out := carry(line, "")
			if len(out) != len(line) || !bytes.Equal(out, line) {
				out = append(out, '\n')
			}
			st.pending = append(st.pending[:0], out...)
		}
		if len(st.pending) == 0 && err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return 0, err
		}
	}
	n := copy(p, st.pending)
	st.pending = st.pending[n:]
	return n, nil
}

// notify writes a notification as one line, between the SDK's messages.
func (st *stream) notify(method string, params any) error {
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return err
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	_, err = st.w.Write(append(msg, '\n'))
	return err
}

// nopCloser is stdout as the SDK's StdioTransport uses it: never closed.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// carried returns the transport the Server connects over instead of t, and the
// stream it reads (nil for a transport it cannot read: that session has no
// protocol tasks).
func (s *Server) carried(t mcp.Transport) (mcp.Transport, *stream) {
	switch tt := t.(type) {
	case *mcp.StdioTransport:
		st := newStream(os.Stdin, nopCloser{os.Stdout})
		return st.transport(tt.MaxLineLength), st
	case *mcp.IOTransport:
		st := newStream(tt.Reader, tt.Writer)
		return st.transport(tt.MaxLineLength), st
	}
	return t, nil
}

// namesSessionless reports whether a JSON-RPC message (or the first of a batch)
// names a sessionless revision in params._meta.
func namesSessionless(msg []byte) bool {
	if !bytes.Contains(msg, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	trimmed := bytes.TrimSpace(msg)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil || len(batch) == 0 {
			return false
		}
		trimmed = batch[0]
	}
	var m struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(trimmed, &m) != nil {
		return false
	}
	v, _ := m.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= sessionlessVersion
}
