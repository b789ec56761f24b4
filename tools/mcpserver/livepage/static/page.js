// The live page of taskrt-mcp: sessions (owners) with their tasks, from the event
// stream at "events", and the output of the selected task, from "tail" (observer
// reads: the model's task_output is not disturbed). Read-only: nothing here acts on
// a task. Every text from the server is put in the page with textContent, never as
// HTML.
"use strict";

const TAIL_KEEP = 256 * 1024; // characters of output kept on the page
const ENDED_KEEP = 10; // ended sessions kept on the page
const TASKS_SHOWN = 50; // settled tasks shown per session (every running one is)
const RANK = { queued: 0, running: 1, stopping: 2, completed: 3, killed: 3, failed: 3 };
const SETTLED = 3;

const state = {
  agents: new Map(), // id → {id, parent, since, ended, evicted, tasks: Map id → task}
  skew: 0, // server clock − browser clock, in ms
  selected: null, // the task id followed in the tail
  overflows: 0,
};

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- the event stream ----

function connect() {
  const es = new EventSource("events");
  es.addEventListener("snapshot", (m) => {
    applySnapshot(JSON.parse(m.data));
    setConn("live", "live");
  });
  es.addEventListener("event", (m) => applyEvent(JSON.parse(m.data)));
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) setConn("closed", "disconnected (reload to retry)");
    else setConn("reconnecting", "reconnecting…");
  };
}

function setConn(s, text) {
  document.body.dataset.state = s;
  $("conn").textContent = text;
}

function agent(id) {
  let a = state.agents.get(id);
  if (!a) {
    a = { id, parent: "", since: null, ended: false, evicted: 0, tasks: new Map() };
    state.agents.set(id, a);
  }
  return a;
}

// applySnapshot replaces the live state: the owners it lists are the live ones
// (those missing from it ended), their tasks are its tasks.
function applySnapshot(s) {
  state.skew = Date.parse(s.now) - Date.now();
  const live = new Set(s.agents.map((a) => a.id));
  for (const a of state.agents.values()) {
    if (!live.has(a.id) && a.id !== "") a.ended = true;
  }
  for (const sa of s.agents) {
    const a = agent(sa.id);
    Object.assign(a, { parent: sa.parent || "", since: sa.since || null, ended: false, evicted: sa.evicted || 0 });
    a.fresh = new Map();
  }
  const unowned = agent("");
  unowned.fresh = new Map();
  for (const t of s.tasks) {
    const a = agent(t.owner);
    const old = a.tasks.get(t.id);
    // The snapshot carries the size from the task's state; an event seen before
    // may have told a larger one.
    const b = Math.max(old && old.bytes != null ? old.bytes : -1, t.bytes != null ? t.bytes : -1);
    t.bytes = b < 0 ? null : b;
    (a.fresh || (a.fresh = new Map())).set(t.id, t);
  }
  for (const a of state.agents.values()) {
    if (a.fresh) a.tasks = a.fresh;
    delete a.fresh;
  }
  render();
}

// applyEvent applies one runtime event. Events may repeat what the snapshot
// already shows (they were queued before it was taken): applying them is
// idempotent, and a task's status never goes back.
function applyEvent(e) {
  switch (e.kind) {
    case "agent-registered": {
      const a = agent(e.agent);
      a.parent = e.parent || "";
      a.since = a.since || e.time;
      a.ended = false;
      break;
    }
    case "agent-disposed":
      if (state.agents.has(e.agent)) agent(e.agent).ended = true;
      break;
    case "overflow":
      state.overflows++;
      $("notice").textContent = `missed ${e.missed} events (too slow): resynchronised`;
      break;
    default: {
      if (!e.task) break;
      const a = agent(e.task.owner);
      if (e.kind === "task-evicted") {
        if (a.tasks.delete(e.task.id)) a.evicted++;
        break;
      }
      const t = a.tasks.get(e.task.id);
      if (!t) {
        e.task.bytes = e.kind === "task-output" ? e.bytes : null;
        a.tasks.set(e.task.id, e.task);
      } else {
        if (RANK[e.task.status] >= RANK[t.status]) {
          Object.assign(t, { status: e.task.status, detail: e.task.detail, finished: e.task.finished, output_full: !!e.task.output_full });
        }
        // Settlement ends a task's watches.
        if (RANK[t.status] === SETTLED) t.watches = 0;
        if (e.kind === "task-output") t.bytes = Math.max(t.bytes || 0, e.bytes);
      }
    }
  }
  scheduleRender();
}

// ---- rendering ----

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  setTimeout(() => {
    renderPending = false;
    render();
  }, 50);
}

function now() {
  return Date.now() + state.skew;
}

function fmtDuration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, "0")}m`;
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function taskTime(t) {
  const start = Date.parse(t.started);
  const end = t.finished ? Date.parse(t.finished) : now();
  return fmtDuration(end - start);
}

function render() {
  // Drop the oldest ended sessions past ENDED_KEEP.
  const ended = [...state.agents.values()].filter((a) => a.ended);
  for (const a of ended.slice(0, Math.max(0, ended.length - ENDED_KEEP))) state.agents.delete(a.id);

  const box = $("agents");
  const scroll = box.scrollTop;
  box.replaceChildren();
  let running = 0, queued = 0, total = 0, sessions = 0;
  for (const a of state.agents.values()) {
    if (a.id === "" && a.tasks.size === 0) continue;
    if (!a.ended && a.id !== "") sessions++;
    box.append(renderAgent(a));
    for (const t of a.tasks.values()) {
      total++;
      if (t.status === "running") running++;
      if (t.status === "queued") queued++;
    }
  }
  if (!box.children.length) {
    box.append(el("p", "empty", "No session yet. Tasks appear here as MCP clients start them."));
  }
  box.scrollTop = scroll;
  $("counts").textContent = `${sessions} session${sessions === 1 ? "" : "s"} · ${running} running` +
    (queued ? ` · ${queued} queued` : "") + ` · ${total} tasks`;
  renderTailHead();
}

function renderAgent(a) {
  const sec = el("section", "agent" + (a.ended ? " ended" : ""));
  sec.dataset.agent = a.id;
  const h = el("h2", "", a.id === "" ? "(unowned)" : a.id);
  const meta = [];
  if (a.parent) meta.push(`child of ${a.parent}`);
  if (a.since && !a.ended) meta.push(`session for ${fmtDuration(now() - Date.parse(a.since))}`);
  if (a.evicted) meta.push(`${a.evicted} older settled tasks dropped`);
  if (meta.length) h.append(el("span", "meta", meta.join(" · ")));
  sec.append(h);
  const tasks = [...a.tasks.values()];
  if (!tasks.length) {
    sec.append(el("p", "none", "no task"));
    return sec;
  }
  // Every running task, and the latest settled ones.
  const settled = tasks.filter((t) => RANK[t.status] === SETTLED);
  const hidden = new Set(settled.slice(0, Math.max(0, settled.length - TASKS_SHOWN)).map((t) => t.id));
  const table = el("table");
  const head = el("tr");
  for (const [c, text] of [["c-id", "task"], ["c-status", "status"], ["c-time", "time"], ["c-bytes", "output"], ["c-label", "command"]]) {
    head.append(el("th", c, text));
  }
  const thead = el("thead");
  thead.append(head);
  table.append(thead);
  const body = el("tbody");
  for (const t of tasks) {
    if (hidden.has(t.id)) continue;
    const bad = failedOutcome(t);
    const tr = el("tr", "s-" + t.status + (bad ? " bad" : "") + (t.id === state.selected ? " selected" : ""));
    tr.dataset.task = t.id;
    tr.dataset.status = t.status;
    tr.append(el("td", "id", t.id));
    const st = el("td", "status");
    st.append(el("span", "pill", t.status));
    // The exit code or failure detail beside the status: "completed" with exit
    // code 2 is not a success, and is not shown as one.
    if (t.detail) {
      st.append(el("span", "detail", t.detail));
      st.title = t.detail;
    }
    // A task in block mode whose work waits for its owner to read says so.
    if (t.output_full) {
      const f = el("span", "full", "output full");
      f.title = "the command waits until its owner reads its output (block mode)";
      st.append(f);
    }
    // A task with live task_watch watches (as of the snapshot) wears a badge.
    if (t.watches > 0) {
      const w = el("span", "watched", t.watches > 1 ? `watched ×${t.watches}` : "watched");
      w.title = `${t.watches} task_watch ${t.watches > 1 ? "watches" : "watch"} on this task's output`;
      st.append(w);
    }
    tr.append(st);
    tr.append(el("td", "time", taskTime(t)));
    tr.append(el("td", "bytes", fmtBytes(t.bytes)));
    const label = el("td", "label", t.label);
    label.title = t.label;
    tr.append(label);
    tr.tabIndex = 0;
    body.append(tr);
  }
  table.append(body);
  sec.append(table);
  if (hidden.size) sec.append(el("div", "more", `${hidden.size} older settled tasks not shown`));
  return sec;
}

// failedOutcome says whether a settled task did not succeed: failed, or completed
// with a non-zero exit code.
function failedOutcome(t) {
  if (t.status === "failed") return true;
  if (t.status !== "completed" || !t.detail) return false;
  const m = /exit code: (-?\d+)/.exec(t.detail);
  return m !== null && m[1] !== "0";
}

function findTask(id) {
  for (const a of state.agents.values()) {
    const t = a.tasks.get(id);
    if (t) return t;
  }
  return null;
}

// ---- the tail ----

let tail = null; // {es, text, decoder, id}

function select(id) {
  if (tail) tail.es.close();
  state.selected = id;
  const pre = $("tail");
  pre.replaceChildren();
  const text = document.createTextNode("");
  pre.append(text);
  const es = new EventSource("tail?task=" + encodeURIComponent(id));
  tail = { es, text, id, decoder: new TextDecoder("utf-8") };
  const me = tail;
  $("tailpane").dataset.state = "following";
  es.addEventListener("output", (m) => {
    const c = JSON.parse(m.data);
    if (c.missed) {
      flushText(me, me.decoder.decode());
      me.decoder = new TextDecoder("utf-8");
      appendMark(me, `[… ${c.missed} bytes not held …]`, "gap");
    }
    flushText(me, me.decoder.decode(base64Bytes(c.data), { stream: true }));
  });
  es.addEventListener("end", (m) => {
    const e = JSON.parse(m.data);
    es.close();
    flushText(me, me.decoder.decode());
    const why = {
      settled: `${e.status}${e.detail ? " (" + e.detail + ")" : ""}`,
      evicted: "its output is no longer kept",
      gone: "its session ended",
      "no-output": "this kind of task has no output to follow",
    }[e.reason] || e.reason;
    appendMark(me, `[${why}]`, "end");
    if (tail === me) {
      $("tailpane").dataset.state = "ended";
      $("tailpane").dataset.reason = e.reason;
      renderTailHead();
    }
  });
  es.onerror = () => {
    if (tail !== me || es.readyState !== EventSource.CLOSED) return;
    $("tailpane").dataset.state = "error";
    appendMark(me, "[the task cannot be followed]", "end");
  };
  render();
}

function base64Bytes(s) {
  const bin = atob(s || "");
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

// ANSI colour and cursor sequences are dropped: the tail shows text.
const ANSI = /\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g;

function flushText(t, s) {
  if (!s) return;
  const pre = $("tail");
  const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
  t.text.appendData(s.replace(ANSI, ""));
  if (t.text.length > TAIL_KEEP) t.text.deleteData(0, t.text.length - TAIL_KEEP);
  if (tail === t && atBottom) pre.scrollTop = pre.scrollHeight;
}

function appendMark(t, s, cls) {
  if (tail !== t) return;
  const pre = $("tail");
  const line = t.text.length && !t.text.data.endsWith("\n") ? "\n" + s + "\n" : s + "\n";
  pre.append(el("span", cls, line));
  t.text = document.createTextNode("");
  pre.append(t.text);
  while (pre.childNodes.length > 400) pre.firstChild.remove();
}

function renderTailHead() {
  if (!state.selected) return;
  const t = findTask(state.selected);
  $("tail-task").textContent = t ? `${t.id} · ${t.label}` : state.selected;
  $("tail-state").textContent = t ? `${t.status}${t.detail ? " · " + t.detail : ""} · ${taskTime(t)}` : "";
}

// Rows are rebuilt on every change, so a row is selected on the press itself (a
// click needs the same element under the press and the release), by delegation.
$("agents").addEventListener("mousedown", (e) => {
  const tr = e.button === 0 && e.target.closest("tr[data-task]");
  if (tr) select(tr.dataset.task);
});
$("agents").addEventListener("keydown", (e) => {
  const tr = (e.key === "Enter" || e.key === " ") && e.target.closest("tr[data-task]");
  if (tr) {
    e.preventDefault();
    select(tr.dataset.task);
  }
});

connect();
setInterval(render, 1000); // ages
