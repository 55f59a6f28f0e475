// The devtools page's script (devtools.html; DevtoolsPage puts it inline when it serves the page).
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const ROW = 24, PAGE = 100;
  const $ = (id) => document.getElementById(id);
  const state = {
    total: 0, first: 0, last: 0, pages: new Map(), selected: null, follow: true, unlocked: false,
    traveling: false, at: 0, history: { first: 0, last: 0 }, types: new Set(), filterKey: "", searchText: "",
    plugins: new Map()  // mount key -> { name, version }
  };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "class") node.className = value; else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    for (const child of children) if (child != null) node.append(child instanceof Node ? child : String(child));
    return node;
  }

  function say(text, bad) { const m = $("message"); m.textContent = text || ""; m.className = bad ? "bad" : ""; }

  async function api(path, options) {
    const response = await fetch(path, Object.assign({ headers: { "X-Devtools-Token": token }, cache: "no-store" }, options || {}));
    const text = await response.text();
    let body;
    try { body = JSON.parse(text); } catch (e) { body = { error: text }; }
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  // Values as Lua writes them: recordings keep integers, floats and non-string keys apart ({"$map": [[k, v], …]}).
  function isMap(v) { return v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && Array.isArray(v.$map); }
  function luaKey(k) {
    if (typeof k === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) return k;
    return "[" + lua(k) + "]";
  }
  function lua(v, indent) {
    indent = indent || "";
    if (v === null || v === undefined) return "nil";
    if (typeof v === "string") return JSON.stringify(v);
    if (typeof v !== "object") return String(v);
    let pairs;
    if (Array.isArray(v)) pairs = v.map((x) => [null, x]);
    else if (isMap(v)) pairs = v.$map.map(([k, x]) => [k, x]);
    else pairs = Object.keys(v).map((k) => [k, v[k]]);
    if (pairs.length === 0) return "{}";
    const inner = indent + "  ";
    const parts = pairs.map(([k, x]) => (k === null ? "" : luaKey(k) + " = ") + lua(x, inner));
    const flat = "{ " + parts.join(", ") + " }";
    if (flat.length <= 72 && !flat.includes("\n")) return flat;
    return "{\n" + parts.map((p) => inner + p).join(",\n") + "\n" + indent + "}";
  }
  // (Paths are rendered and parsed by the server, with the rules Lua's and Swift's messages use: LuaPath.)
  function originText(o) {
    if (typeof o === "string") return o;
    if (o && o.effect) return o.effect + (o.subscription ? " (" + o.subscription + ")" : "");
    return "?";
  }
  function timeText(ms) { const d = new Date(ms); return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0"); }
  function costText(ns) { return ns >= 1e6 ? (ns / 1e6).toFixed(1) + "ms" : ns >= 1e3 ? (ns / 1e3).toFixed(1) + "µs" : ns + "ns"; }

  // The timeline: a virtual list; rows come a page at a time from /api/entries, only those in view.
  function filterQuery() {
    const q = new URLSearchParams();
    if ($("type-filter").value) q.set("type", $("type-filter").value);
    if ($("text-filter").value) q.set("text", $("text-filter").value);
    if ($("path-filter").value) q.set("pathText", $("path-filter").value);
    if ($("failed-filter").checked) q.set("failed", "1");
    return q;
  }
  function filtered() { return filterQuery().toString() !== ""; }

  async function loadPage(index) {
    const key = state.filterKey + ":" + index;
    if (state.pages.has(key)) return state.pages.get(key);
    const q = filterQuery();
    q.set("offset", index * PAGE); q.set("limit", PAGE);
    const promise = api("/api/entries?" + q).then((body) => { state.total = body.total; return body.entries; });
    state.pages.set(key, promise);
    promise.catch(() => state.pages.delete(key));
    return promise;
  }

  let rendering = false;
  async function render() {
    if (rendering) { rendering = "again"; return; }
    rendering = true;
    try {
      const timeline = $("timeline");
      $("spacer").style.height = (state.total * ROW) + "px";
      if (state.follow) timeline.scrollTop = timeline.scrollHeight;
      const from = Math.max(0, Math.floor(timeline.scrollTop / ROW) - 5);
      const to = Math.min(state.total, from + Math.ceil(timeline.clientHeight / ROW) + 10);
      const rows = [];
      for (let page = Math.floor(from / PAGE); page * PAGE < to; page++) {
        const entries = await loadPage(page);
        entries.forEach((entry, i) => {
          const index = page * PAGE + i;
          if (index >= from && index < to) rows.push([index, entry]);
        });
      }
      $("spacer").style.height = (state.total * ROW) + "px";
      $("spacer").replaceChildren(...rows.map(([index, e]) => row(index, e)));
    } catch (error) { say(error.message, true); }
    const again = rendering === "again";
    rendering = false;
    if (again) render();
  }

  function row(index, e) {
    const classes = ["row"];
    if (e.failure) classes.push("failed");
    if (e.kind !== "action") classes.push("reload");
    if (state.selected === e.seq) classes.push("selected");
    if (state.traveling && e.seq > state.at) classes.push("future");
    if (state.traveling && e.seq === state.at) classes.push("here");
    if (state.diverged === e.seq) classes.push("diverged");
    const label = e.kind === "action" ? e.type : e.kind === "reload" ? "reload" + (e.from !== e.to ? " (schema " + e.from + "→" + e.to + ")" : "") : "reload failed";
    const node = el("div", { class: classes.join(" "), "data-seq": e.seq, title: e.failure ? e.failure.message : "" },
      el("span", { class: "num" }, e.seq), el("span", { class: "type" }, label), el("span", {}, originText(e.origin)),
      el("span", {}, timeText(e.time)), el("span", { class: "num" }, e.kind === "action" ? costText(e.ns) : ""), el("span", { class: "num" }, e.changes));
    node.style.top = (index * ROW) + "px";
    node.addEventListener("click", () => { state.selectedIndex = index; select(e.seq); });
    return node;
  }

  function resetPages() { state.pages.clear(); state.filterKey = filterQuery().toString() + "@" + Date.now(); }
  function refilter() { resetPages(); state.follow = true; state.selectedIndex = undefined; refresh(); }
  async function refresh() {
    try {
      const q = filterQuery(); q.set("limit", 0);
      const body = await api("/api/entries?" + q);
      state.total = body.total;
    } catch (error) { say(error.message, true); }
    render();
  }
  $("timeline").addEventListener("scroll", () => {
    const t = $("timeline");
    state.follow = t.scrollTop + t.clientHeight >= t.scrollHeight - ROW;
    render();
  });
  // ↑ and ↓ move the selection through the timeline (as filtered), keeping it in view.
  $("timeline").addEventListener("keydown", async (event) => {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    event.preventDefault();
    if (state.total === 0) return;
    const from = state.selectedIndex === undefined ? (event.key === "ArrowDown" ? -1 : state.total) : state.selectedIndex;
    const index = Math.max(0, Math.min(state.total - 1, from + (event.key === "ArrowDown" ? 1 : -1)));
    const entries = await loadPage(Math.floor(index / PAGE));
    const entry = entries[index % PAGE];
    if (!entry) return;
    state.selectedIndex = index; state.follow = false;
    const t = $("timeline");
    if (index * ROW < t.scrollTop) t.scrollTop = index * ROW;
    else if ((index + 1) * ROW > t.scrollTop + t.clientHeight) t.scrollTop = (index + 1) * ROW - t.clientHeight;
    select(entry.seq);
  });
  for (const id of ["type-filter", "failed-filter"]) $(id).addEventListener("change", refilter);
  for (const id of ["text-filter", "path-filter"]) {
    let timer; $(id).addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refilter, 250); });
  }

  // The selected entry.
  async function select(seq) {
    state.selected = seq;
    for (const node of document.querySelectorAll(".row")) node.classList.toggle("selected", Number(node.dataset.seq) === seq);
    updateButtons();
    $("empty").hidden = true;
    const detail = $("detail");
    detail.hidden = false;
    detail.replaceChildren(el("p", { class: "note" }, "loading entry " + seq + "…"));
    let body;
    try { body = await api("/api/entry?seq=" + seq); } catch (error) { detail.replaceChildren(el("p", { class: "failure" }, error.message)); return; }
    if (state.selected !== seq) return;
    const s = body.summary, line = body.line || {};
    const parts = [];
    const title = s.kind === "action" ? "Action #" + seq : s.kind === "reload" ? "Reload #" + seq : "Failed reload #" + seq;
    parts.push(el("h2", { class: "title" }, title + " · " + originText(s.origin) + " · " + timeText(s.time) + " · " + costText(s.ns) + " · scripts " + s.scripts));
    if (line.action !== undefined) parts.push(el("pre", { id: "action" }, lua(line.action)));
    if (s.failure) parts.push(el("pre", { class: "failure", id: "failure" }, s.failure.stage + " failed: " + s.failure.message + (s.failure.location ? "\n  at " + s.failure.location : "")));
    parts.push(el("h2", {}, "Changes (" + s.changes + ")"));
    const changes = line.changes || [];
    if (changes.length === 0) parts.push(el("p", { class: "note" }, s.failure ? "nothing: the transaction was undone" : "nothing changed"));
    else {
      // With mounted plugins, each change says whose it is: the plugin whose slice it lies in, or the app.
      const mounted = state.plugins.size > 0;
      const table = el("table", { class: "diff", id: "diff" }, el("tr", {}, el("th", {}, "path"), mounted ? el("th", {}, "by") : null,
        el("th", {}, "before"), el("th", {}, "after")));
      changes.forEach((change, i) => {
        const before = body.before ? lua(body.before[i]) : "?";
        const after = change.length > 1 ? el("td", { class: "after" }, lua(change[1])) : el("td", { class: "removed" }, "removed");
        const plugin = mounted && change[0].length > 0 ? state.plugins.get(change[0][0]) : undefined;
        const by = mounted ? el("td", { class: "by" }, plugin ? "plugin " + plugin.name : "app") : null;
        table.append(el("tr", {}, el("td", {}, body.paths[i]), by, el("td", { class: "before" }, before), after));
      });
      parts.push(table);
      if (body.beforeNote) parts.push(el("p", { class: "note" }, body.beforeNote));
    }
    if (body.commands && body.commands.length) {
      parts.push(el("h2", {}, "Commands returned (" + body.commands.length + ")"));
      parts.push(el("pre", { id: "commands" }, body.commands.map((c) => lua(c)).join("\n")));
    }
    if (body.subscriptions) {
      const launched = Object.keys(body.subscriptions.launched), cancelled = body.subscriptions.cancelled;
      parts.push(el("h2", {}, "Subscriptions"));
      parts.push(el("pre", { id: "subscriptions" },
        launched.map((k) => "launched " + k + ": " + lua(body.subscriptions.launched[k])).concat(cancelled.map((k) => "cancelled " + k)).join("\n")));
    }
    parts.push(el("h2", {}, "Props after #" + seq));
    parts.push(body.props !== undefined ? el("pre", { id: "props" }, lua(body.props)) : el("p", { class: "note" }, body.propsNote || "not kept"));
    parts.push(el("h2", {}, "State after #" + seq));
    const search = el("input", { type: "search", placeholder: "search the state at this point", id: "state-search" });
    const results = el("div", { class: "tree" });
    search.addEventListener("keydown", (event) => { if (event.key === "Enter") searchState(seq, search.value, results); });
    parts.push(search, results);
    const tree = el("div", { class: "tree", id: "state-tree" });
    parts.push(tree);
    detail.replaceChildren(...parts);
    const ul = el("ul");
    tree.append(ul);
    expand(seq, [], ul, 0).catch((error) => tree.replaceChildren(el("p", { class: "note" }, error.message)));
  }

  async function expand(seq, path, ul, offset) {
    const q = new URLSearchParams({ path: JSON.stringify(path), offset: offset, limit: 200 });
    if (seq !== null) q.set("seq", seq);
    const slice = await api("/api/state?" + q);
    for (const item of slice.items) {
      const here = path.concat([item.key]);
      const li = el("li", {});
      if (item.size !== undefined) {
        const toggle = el("span", { class: "toggle" }, "▸");
        const children = el("ul", { hidden: "" });
        let loaded = false;
        const open = async () => {
          const opening = children.hidden;
          children.hidden = !opening;
          toggle.textContent = opening ? "▾" : "▸";
          if (opening && !loaded) { loaded = true; await expand(seq, here, children, 0).catch((e) => children.append(el("li", { class: "note" }, e.message))); }
        };
        toggle.addEventListener("click", open);
        li.append(toggle, el("span", { class: "key", onclick: open }, luaKey(item.key)), " ", el("span", { class: "size" }, "{" + item.size + "}"), children);
      } else {
        li.append(el("span", { class: "toggle" }, ""), el("span", { class: "key" }, luaKey(item.key)), " = ", lua(item.value));
      }
      ul.append(li);
    }
    const shown = offset + slice.items.length;
    if (shown < slice.count) {
      const more = el("li", { class: "more" }, "… " + (slice.count - shown) + " more");
      more.addEventListener("click", () => { more.remove(); expand(seq, path, ul, shown); });
      ul.append(more);
    }
  }

  async function searchState(seq, text, results) {
    if (!text) { results.replaceChildren(); return; }
    try {
      const q = new URLSearchParams({ q: text }); if (seq !== null) q.set("seq", seq);
      const body = await api("/api/search?" + q);
      results.replaceChildren(el("p", { class: "note" }, body.matches.length + " found" + (body.matches.length >= 200 ? " (the first 200)" : "")),
        el("ul", {}, ...body.matches.map((m) => el("li", { class: "hit" }, m.text, m.value !== undefined ? " = " + lua(m.value) : ""))));
    } catch (error) { results.replaceChildren(el("p", { class: "failure" }, error.message)); }
  }

  // Status, locking, time travel, dispatch.
  function showStatus() {
    const status = $("status");
    status.className = state.traveling ? "traveling" : "";
    status.textContent = state.traveling
      ? "time travel: showing #" + state.at + (state.held ? " · " + state.held + " action(s) held" : "")
      : (state.imported ? "recording · " : "live · ") + state.total + " entries" + (state.first > 1 ? " (from #" + state.first + ")" : "");
    $("lock").textContent = state.unlocked ? "Lock" : "Unlock dispatch & time travel";
    const slider = $("slider");
    slider.min = state.history.first; slider.max = state.history.last;
    if (!slider.matches(":active")) slider.value = state.traveling ? state.at : state.history.last;
    updateButtons();
  }
  function updateButtons() {
    const u = state.unlocked, kept = state.selected !== null && state.selected >= state.history.first && state.selected <= state.history.last;
    $("jump").disabled = !u || !kept;
    $("rewind").disabled = !u || !kept;
    $("resume").disabled = !u || !state.traveling;
    $("slider").disabled = !u || state.history.last === 0;
    $("dispatch-button").disabled = !u;
  }
  function sizeText(bytes) {
    return bytes < 1024 ? bytes + " B" : bytes < 1048576 ? (bytes / 1024).toFixed(1) + " KiB" : (bytes / 1048576).toFixed(1) + " MiB";
  }
  function showPersistence(p) {
    const box = $("persistence");
    box.hidden = !p;
    if (!p) return;
    box.className = p.failure ? "failed" : "";
    box.title = "the store's database: " + p.path + " (" + p.durability + " sync)" + (p.committed ? "; last commit at " + new Date(p.committed).toLocaleTimeString() : "");
    box.textContent = p.failure ? "database not written: " + p.failure : "saved through #" + p.sequence + " · " + sizeText(p.bytes);
  }
  // Each mounted plugin's cost so far: calls, time per call, failures (read every 2 s while the page is open).
  function showPlugins(list) {
    const box = $("plugins");
    box.hidden = list.length === 0;
    box.replaceChildren(...list.map((p) => el("span", {
      class: "plugin" + (p.failures ? " failing" : ""), "data-key": p.key,
      title: "plugin " + p.name + " " + p.version + " at state." + p.key + ": " + p.calls + " calls, " + costText(p.nanoseconds) + " in all, " +
        p.allocations + " blocks allocated, " + p.failures + " failed"
    }, p.name + " " + p.version + ": " + p.calls + " calls · " + costText(p.calls ? Math.round(p.nanoseconds / p.calls) : 0) + "/call" +
      (p.failures ? " · " + p.failures + " failed" : ""))));
  }
  async function refreshPlugins() {
    try { showPlugins((await api("/api/plugins")).plugins); } catch (error) { /* shown by the socket */ }
  }
  function applySession(s) {
    state.plugins = new Map((s.plugins || []).map((p) => [p.key, p]));
    const wasImported = !!state.imported;
    state.imported = s.imported;
    const banner = $("imported");
    banner.hidden = !s.imported;
    if (s.imported) {
      const i = s.imported;
      banner.replaceChildren(el("span", { id: "imported-summary" }, "Browsing the recording " + i.name + ": " + i.entries + " actions (recorded from #" + i.recordedFirst + ", numbered from 1 here" +
        (i.skippedReloads ? "; " + i.skippedReloads + " reload entries skipped" : "") + "). " +
        (i.divergence ? "The current scripts compute something else from #" + i.divergence.seq + " (" + i.divergence.path + "): from there, states are the current scripts'. " : "Every action's changes match the recording. ")),
        el("button", { id: "back", onclick: () => post("/api/back") }, "Back to the running app"));
    }
    if (wasImported !== !!s.imported) { state.total = s.count; state.first = s.first; state.selected = null; $("detail").hidden = true; $("empty").hidden = false; resetPages(); refresh(); }
    state.unlocked = s.unlocked; state.traveling = s.traveling; state.held = s.held; state.at = s.history.at;
    state.history = { first: s.history.first, last: s.history.last };
    for (const type of s.types) addType(type);
    showPersistence(s.persistence);
    showStatus();
  }
  function addType(type) {
    if (state.types.has(type)) return;
    state.types.add(type);
    for (const id of ["type-filter", "dispatch-type"]) $(id).append(el("option", { value: type }, type));
  }
  async function post(path, body) {
    try {
      const s = await api(path, { method: "POST", body: body, headers: { "X-Devtools-Token": token, "Content-Type": "application/json" } });
      applySession(s); say(""); resetPages(); render(); return true;
    } catch (error) { say(error.message, true); return false; }
  }
  $("lock").addEventListener("click", () => post(state.unlocked ? "/api/lock" : "/api/unlock"));
  $("jump").addEventListener("click", () => post("/api/jump?seq=" + state.selected));
  $("resume").addEventListener("click", () => post("/api/resume"));
  $("rewind").addEventListener("click", () => {
    if (confirm("Rewind to #" + state.selected + "? Entries after it are dropped from the history.")) post("/api/rewind?seq=" + state.selected);
  });
  $("slider").addEventListener("change", () => post("/api/jump?seq=" + $("slider").value));
  $("dispatch-type").addEventListener("change", () => {
    if ($("dispatch-type").value) $("dispatch-text").value = JSON.stringify({ type: $("dispatch-type").value });
  });
  $("dispatch-button").addEventListener("click", async () => {
    const text = $("dispatch-text").value.trim();
    try { JSON.parse(text); } catch (error) { say("not JSON: " + error.message, true); return; }
    if (await post("/api/dispatch", text)) say("dispatched");
  });
  async function download(route, name) {
    try {
      const response = await fetch(route, { headers: { "X-Devtools-Token": token } });
      if (!response.ok) throw new Error((await response.json()).error);
      const link = el("a", { href: URL.createObjectURL(await response.blob()), download: name });
      document.body.append(link); link.click(); link.remove();
    } catch (error) { say(error.message, true); }
  }
  $("export").addEventListener("click", () => download("/api/export", $("app").textContent + ".luastore-recording.jsonl"));
  $("export-spec").addEventListener("click", () => download("/api/export-spec", $("app").textContent + "_session_spec.lua"));

  // Replay with the current scripts, and the first entry where a condition holds.
  function scrollTo(seq) {
    if (filtered()) {
      for (const id of ["type-filter", "text-filter", "path-filter"]) $(id).value = "";
      $("failed-filter").checked = false; resetPages();
    }
    state.follow = false;
    const t = $("timeline");
    t.scrollTop = Math.max(0, (seq - state.first) * ROW - t.clientHeight / 2);
    refresh().then(() => select(seq));
  }
  $("replay").addEventListener("click", async () => {
    const box = $("replay-result");
    box.hidden = false; box.className = ""; box.replaceChildren(el("p", { class: "note" }, "replaying the session with the current scripts…"));
    $("replay").classList.remove("attention"); say("");
    let report;
    try { report = await api("/api/replay", { method: "POST", headers: { "X-Devtools-Token": token } }); }
    catch (error) { box.className = "diverged"; box.replaceChildren(el("p", { class: "failure" }, error.message)); return; }
    const close = el("button", { style: "float:right", onclick: () => { box.hidden = true; state.diverged = null; render(); } }, "×");
    if (report.matches) {
      state.diverged = null; box.className = "matched";
      box.replaceChildren(close, el("p", { id: "replay-summary" }, "Replayed " + report.replayed + " actions with the current scripts: changes, failures, commands" + (report.propsCompared ? " and props" : "") + " all match."));
      render(); return;
    }
    const d = report.divergence;
    state.diverged = d.seq; box.className = "diverged";
    const table = el("table", { class: "diff" }, el("tr", {}, el("th", {}, "where"), el("th", {}, "recorded (scripts " + d.scripts.then + ")"), el("th", {}, "now (scripts " + d.scripts.now + ")")));
    for (const x of d.differences) table.append(el("tr", {}, el("td", {}, x.path), el("td", { class: "before" }, "then" in x ? lua(x.then) : "nil"), el("td", { class: "after" }, "now" in x ? lua(x.now) : "nil")));
    box.replaceChildren(close, el("p", { id: "replay-summary" }, "The current scripts diverge at action #" + d.seq + " (" + d.what + "), after " + (report.replayed - 1) + " matching actions:"),
      el("pre", {}, lua(d.action)), table);
    scrollTo(d.seq);
  });
  $("first-where").addEventListener("keydown", async (event) => {
    if (event.key !== "Enter" || !$("first-where").value.trim()) return;
    try {
      const r = await api("/api/first?where=" + encodeURIComponent($("first-where").value));
      if (r.result === "entry") { say("first holds after #" + r.seq); scrollTo(r.seq); }
      else if (r.result === "start") say("it already holds before the oldest kept entry");
      else say("it holds at none of the " + r.checked + " kept points");
    } catch (error) { say(error.message, true); }
  });

  $("import").addEventListener("click", () => $("import-file").click());
  $("import-file").addEventListener("change", async () => {
    const file = $("import-file").files[0];
    if (!file) return;
    say("importing " + file.name + "…");
    if (await post("/api/import?name=" + encodeURIComponent(file.name), await file.text())) say("imported " + file.name);
    $("import-file").value = "";
  });

  // The live stream.
  function connect() {
    const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/live?token=" + encodeURIComponent(token));
    let dropped = false;
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "entries" && state.imported) {
        return; // (the running app's entries; the page shows a recording)
      } else if (message.type === "entries") {
        if (message.first !== state.first) resetPages();
        state.first = message.first; state.last = message.last;
        for (const e of message.tail) {
          if (e.type) addType(e.type);
          if (e.kind === "reload") { $("replay").classList.add("attention"); say("the scripts were reloaded: replay the session to compare"); }
        }
        if (!filtered()) {
          // The newest page may have grown: forget it (and the one before, which a shift may touch).
          const last = Math.floor(Math.max(0, state.total - 1) / PAGE);
          state.pages.delete(state.filterKey + ":" + last);
          state.total = message.count;
          state.history.last = Math.max(state.history.last, message.last);
          showStatus(); render();
        } else { resetPages(); refresh(); }
      } else if (message.type === "status") {
        state.traveling = message.traveling; state.held = message.held; state.at = message.at; state.unlocked = message.unlocked;
        showStatus(); resetPages(); render();
      } else if (message.type === "dropped") {
        dropped = true; say(message.reason, true);
      }
    };
    socket.onclose = () => {
      $("status").className = "offline";
      $("status").textContent = dropped ? "disconnected (too far behind): reload the page" : "disconnected: reconnecting…";
      if (!dropped) setTimeout(connect, 1000);
    };
    socket.onopen = async () => { try { applySession(await api("/api/session")); } catch (error) { say(error.message, true); } };
  }

  (async function start() {
    try {
      const s = await api("/api/session");
      $("app").textContent = s.app; document.title = s.app + " · LuaStore devtools";
      state.total = s.count; state.first = s.first; applySession(s);
      resetPages(); render();
      connect();
      // (The database's size and last commit change with every commit: read every 2 s while the page is open.)
      if (s.persistence) setInterval(async () => { try { showPersistence(await api("/api/persistence")); } catch (error) { /* shown by the socket */ } }, 2000);
      if (state.plugins.size > 0) { refreshPlugins(); setInterval(refreshPlugins, 2000); }
    } catch (error) {
      $("status").className = "offline"; $("status").textContent = error.message;
    }
  })();
})();
