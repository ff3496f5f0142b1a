// The session viewer: plain JavaScript, no dependencies. Served pages read the JSON API
// (/api/...); an exported page reads the bundle embedded in it and makes no request.
"use strict";
(function () {
  const bundleEl = document.getElementById("bundle");
  const BUNDLE = bundleEl ? JSON.parse(bundleEl.textContent) : null;
  const ROW_H = 24;
  const PAGE = 200;
  const app = document.getElementById("app");
  const where = document.getElementById("where");

  // ---- data access ----

  function query(path) {
    const [p, q] = path.split("?");
    const params = new URLSearchParams(q || "");
    return [p, params];
  }

  function eventSeq(e) {
    return e.seq;
  }

  // The API over the embedded bundle (export mode).
  function local(path) {
    const [p, params] = query(path);
    const b = BUNDLE;
    const num = (k, d) => (params.has(k) ? Number(params.get(k)) : d);
    if (p === "/api/sessions") return { sessions: b.sessions };
    const m = p.match(/^\/api\/sessions\/([^/]+)(\/[a-z]+)?$/);
    if (!m) throw new Error("not in this page: " + path);
    const sub = m[2] || "";
    if (sub === "") return b.summary;
    if (sub === "/timeline") {
      const depth = num("depth", 2);
      const rank = { turn: 0, step: 1, model: 2, tool: 2 };
      const rows = b.timeline.filter((r) => rank[r.kind] <= depth);
      const from = num("from", 0);
      return { depth, total: rows.length, from, rows: rows.slice(from, from + num("limit", PAGE)) };
    }
    if (sub === "/events") {
      const from = num("from", 0);
      const limit = num("limit", PAGE);
      const out = b.events.filter((e) => (e.lastSeq !== undefined ? e.lastSeq : e.seq) >= from);
      return { from, total: b.summary.eventCount, events: out.slice(0, limit), embedded: true };
    }
    if (sub === "/messages" || sub === "/header") {
      const at = params.get("at");
      const req = b.requests[at];
      if (!req) throw new Error("this page embeds what the model saw at model requests only");
      if (sub === "/header") return req.header;
      const messages = req.seqs.map((s) => ({ seq: s, message: b.messages[String(s)] }));
      return { id: b.summary.id, at: Number(at), count: messages.length, messages };
    }
    if (sub === "/compactions") return { compactions: b.summary.compactions };
    if (sub === "/closers") return { closers: b.summary.closers };
    throw new Error("not in this page: " + path);
  }

  async function api(path) {
    if (BUNDLE) return local(path);
    const r = await fetch(path, { credentials: "same-origin" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  async function eventAt(id, seq) {
    const page = await api(`/api/sessions/${enc(id)}/events?from=${seq}&limit=1`);
    return page.events[0];
  }

  // ---- DOM helpers ----

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") n.className = v;
      // CSSOM, not a style attribute: the pages' CSP allows no inline style attributes.
      else if (k === "style") Object.assign(n.style, v);
      else if (k === "on") for (const [ev, f] of Object.entries(v)) n.addEventListener(ev, f);
      else if (v !== null && v !== undefined) n.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return n;
  }
  const enc = encodeURIComponent;
  const link = (hash, text, cls) => el("a", { href: hash, class: cls || null }, text);
  const json = (v) => el("pre", { class: "json" }, JSON.stringify(v, null, 2));
  const ms = (d) => (d === null || d === undefined ? "" : d < 1000 ? `${d} ms` : `${(d / 1000).toFixed(2)} s`);
  const bytes = (n) => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
  function section(title, id, ...children) {
    return el("section", { id }, el("h2", {}, title), ...children);
  }
  function fail(e) {
    app.replaceChildren(el("p", { class: "error" }, String(e.message || e)));
  }

  // ---- the session list ----

  async function listPage() {
    where.textContent = "";
    const doc = await api("/api/sessions");
    const filter = el("input", { id: "filter", type: "search", placeholder: "filter by id, cwd, lineage" });
    const body = el("tbody");
    const rows = doc.sessions.map((s) => {
      const lineage = s.parentSession ? `← ${s.parentSession}${s.seedLength !== null ? " @" + s.seedLength : ""}` : "";
      const flags = [];
      if (s.tornTail) flags.push(el("span", { class: "flag torn" }, "torn tail"));
      if (s.error) flags.push(el("span", { class: "flag error" }, s.error));
      const tr = el(
        "tr",
        { class: "session-row", "data-id": s.id || "" },
        el("td", {}, s.id ? link(`#/s/${enc(s.id)}`, s.id, "session-link") : "(unreadable)"),
        el("td", {}, s.created || ""),
        el("td", {}, s.cwd || ""),
        el("td", { class: "num" }, s.events === null ? "" : s.events),
        el("td", {}, lineage),
        el("td", { class: "flags" }, ...flags)
      );
      tr.dataset.text = [s.id, s.cwd, lineage, s.file].join(" ").toLowerCase();
      return tr;
    });
    body.append(...rows);
    filter.addEventListener("input", () => {
      const q = filter.value.toLowerCase();
      for (const tr of rows) tr.hidden = q !== "" && !tr.dataset.text.includes(q);
    });
    const head = el("tr", {}, ...["id", "created", "cwd", "events", "lineage", "flags"].map((h) => el("th", {}, h)));
    app.replaceChildren(
      el("h1", {}, `${doc.sessions.length} sessions`, el("span", { class: "muted" }, doc.store ? ` in ${doc.store}` : "")),
      filter,
      el("table", { id: "sessions" }, el("thead", {}, head), body)
    );
    markReady();
  }

  // ---- one session ----

  async function forkTree(id, summary) {
    const box = el("div", { id: "forks" });
    const chain = [];
    let s = summary;
    for (let i = 0; i < 16 && s.lineage.parentSession; i++) {
      const parent = s.lineage.parentSession;
      chain.unshift({ id: parent, seedLength: s.lineage.seedLength });
      try {
        s = BUNDLE ? { lineage: {} } : await api(`/api/sessions/${enc(parent)}`);
      } catch (e) {
        break;
      }
    }
    const ul = el("ul", { class: "tree" });
    let cur = ul;
    for (const p of chain) {
      const li = el("li", {}, link(`#/s/${enc(p.id)}`, p.id, "fork-link parent"), el("span", { class: "muted" }, ` forked at seq ${p.seedLength}`));
      const next = el("ul");
      li.append(next);
      cur.append(li);
      cur = next;
    }
    const me = el("li", {}, el("strong", {}, id));
    const kids = el("ul");
    for (const c of summary.lineage.children) {
      kids.append(el("li", {}, link(`#/s/${enc(c.id)}`, c.id, "fork-link child"), el("span", { class: "muted" }, ` seed ${c.seedLength}`)));
    }
    me.append(kids);
    cur.append(me);
    box.append(ul);
    return box;
  }

  function closersBox(id, closers) {
    if (closers.length === 0) return el("p", { class: "muted" }, "no crash closers");
    const explain = {
      TOOL_OUTCOME_UNKNOWN: "The call was recorded as started but no result was stored before the crash: it may or may not have run.",
      TOOL_NOT_STARTED: "The model asked for the call, but the harness never recorded it as started: it did not run.",
      interrupted: "A crash cut this turn; repair closed it.",
    };
    return el(
      "ul",
      { class: "closers" },
      ...closers.map((c) =>
        el(
          "li",
          { class: `closer code-${c.code}` },
          el("span", { class: "badge" }, c.code),
          " ",
          link(`#/s/${enc(id)}/e/${c.seq}`, `seq ${c.seq}`, "raw-link"),
          c.pending ? el("span", { class: "flag" }, " pending: load would append it") : null,
          el("p", { class: "why" }, explain[c.code] || ""),
          c.explanation ? el("p", { class: "explanation" }, c.explanation) : null
        )
      )
    );
  }

  function sizeText(v) {
    return `${v.messages} messages, ${v.chars} chars (~${v.approxTokens} tokens)`;
  }

  function compactionsBox(id, compactions) {
    if (compactions.length === 0) return el("p", { class: "muted" }, "no compactions");
    return el(
      "div",
      {},
      ...compactions.map((c) => {
        const originals = el("div", { class: "originals", hidden: "" });
        const btn = el("button", { class: "expand", type: "button" }, `show the ${c.resolved.length} originals`);
        btn.addEventListener("click", async () => {
          if (!originals.hidden) {
            originals.hidden = true;
            return;
          }
          if (!originals.childElementCount) {
            for (const s of c.resolved) {
              const e = await eventAt(id, s);
              originals.append(el("div", { class: "original", "data-seq": s }, el("h4", {}, link(`#/s/${enc(id)}/e/${s}`, `seq ${s} · ${e ? e.type : "?"}`)), json(e ? e.data : null)));
            }
          }
          originals.hidden = false;
        });
        return el(
          "div",
          { class: "compaction", "data-seq": c.seq },
          el("h3", {}, `seq ${c.seq} (${c.type}): replaces ${c.range.start}..${c.range.end}`),
          el("p", {}, `shadowed nodes ${c.shadowed.join(", ")}`, c.coveredBy !== null ? ` · later covered by seq ${c.coveredBy}` : ""),
          el("p", { class: "sizes" }, `before: ${sizeText(c.before)} → after: ${sizeText(c.after)}`),
          el("div", { class: "summary" }, el("h4", {}, "summary"), json(c.message)),
          btn,
          originals
        );
      })
    );
  }

  // A virtualised, server-paged timeline: only the visible rows are in the DOM.
  function timelineBox(id, totals) {
    const zoom = el(
      "select",
      { id: "zoom" },
      el("option", { value: "0" }, "turns"),
      el("option", { value: "1" }, "turns + steps"),
      el("option", { value: "2", selected: "" }, "turns, steps, calls")
    );
    const view = el("div", { id: "timeline" });
    const spacer = el("div", { class: "spacer" });
    view.append(spacer);
    let depth = 2;
    let pages = new Map();
    let total = totals[2];
    let scale = 1;
    function pageOf(i) {
      const p = Math.floor(i / PAGE);
      if (!pages.has(p)) {
        pages.set(
          p,
          api(`/api/sessions/${enc(id)}/timeline?depth=${depth}&from=${p * PAGE}&limit=${PAGE}`).then((d) => {
            total = d.total;
            return d.rows;
          })
        );
      }
      return pages.get(p);
    }
    function rowEl(r, i) {
      const indent = { turn: 0, step: 1, model: 2, tool: 2 }[r.kind];
      const usage = r.usage && (r.usage.inputTokens !== undefined || r.usage.outputTokens !== undefined) ? `in ${r.usage.inputTokens ?? "?"} / out ${r.usage.outputTokens ?? "?"} tok` : "";
      const width = r.durationMs ? Math.min(300, Math.max(2, Math.log10(1 + r.durationMs) * 40 * scale)) : 0;
      const n = el(
        "div",
        { class: `row kind-${r.kind}${r.flag ? " flagged" : ""}`, style: { top: `${i * ROW_H}px`, paddingLeft: `${indent * 18 + 4}px` }, "data-start": r.start, "data-kind": r.kind },
        el("span", { class: "kind" }, r.kind),
        el("span", { class: "label" }, r.label),
        el("span", { class: "seqs" }, r.end === null ? `${r.start}…(open)` : `${r.start}..${r.end}`),
        el("span", { class: "bar", style: { width: `${width}px` } }),
        el("span", { class: "dur" }, ms(r.durationMs)),
        el("span", { class: "usage" }, usage),
        r.flag ? el("span", { class: "badge" }, r.flag) : null
      );
      n.addEventListener("click", () => {
        location.hash = r.kind === "model" ? `#/s/${enc(id)}/at/${r.start}` : `#/s/${enc(id)}/e/${r.start}`;
      });
      return n;
    }
    let drawing = 0;
    async function draw() {
      const mine = ++drawing;
      spacer.style.height = `${total * ROW_H}px`;
      const first = Math.max(0, Math.floor(view.scrollTop / ROW_H) - 10);
      const last = Math.min(total, first + Math.ceil(view.clientHeight / ROW_H) + 20);
      const need = new Set();
      for (let i = first; i < last; i++) need.add(Math.floor(i / PAGE));
      const loaded = new Map();
      for (const p of need) loaded.set(p, await pageOf(p * PAGE));
      if (mine !== drawing) return;
      spacer.style.height = `${total * ROW_H}px`;
      const nodes = [];
      for (let i = first; i < Math.min(last, total); i++) {
        const rows = loaded.get(Math.floor(i / PAGE));
        const r = rows && rows[i % PAGE];
        if (r) nodes.push(rowEl(r, i));
      }
      spacer.replaceChildren(...nodes);
      markPainted();
    }
    zoom.addEventListener("change", () => {
      depth = Number(zoom.value);
      total = totals[depth];
      pages = new Map();
      view.scrollTop = 0;
      draw();
    });
    const wider = el("button", { type: "button", id: "zoom-in" }, "+");
    const narrower = el("button", { type: "button", id: "zoom-out" }, "−");
    wider.addEventListener("click", () => { scale *= 1.5; draw(); });
    narrower.addEventListener("click", () => { scale /= 1.5; draw(); });
    view.addEventListener("scroll", () => requestAnimationFrame(draw), { passive: true });
    setTimeout(draw, 0);
    return el("div", {}, el("div", { class: "controls" }, "zoom ", zoom, " duration scale ", narrower, wider), view);
  }

  async function sessionPage(id) {
    where.replaceChildren(" / ", link(`#/s/${enc(id)}`, id));
    const s = await api(`/api/sessions/${enc(id)}`);
    const h = s.header;
    const counts = Object.entries(s.countsByType).map(([t, n]) => `${t} ${n}`).join(", ");
    app.replaceChildren(
      el("h1", {}, id),
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "created"), el("dd", {}, new Date(h.createdAt).toISOString()),
        el("dt", {}, "cwd"), el("dd", {}, h.cwd || ""),
        el("dt", {}, "events"), el("dd", { id: "event-count" }, `${s.eventCount} (${s.storedEventCount} stored)`),
        el("dt", {}, "turns"), el("dd", {}, String(s.turns.length)),
        el("dt", {}, "surface"), el("dd", {}, `${s.surface.nodes} nodes, ${s.surface.messages} messages`),
        el("dt", {}, "torn tail"), el("dd", {}, s.tornTail ? JSON.stringify(s.tornTail) : "none"),
        el("dt", {}, "by type"), el("dd", { class: "muted" }, counts)
      ),
      section("Crash closers", "closers", closersBox(id, s.closers)),
      section("Timeline", "timeline-section", timelineBox(id, s.timelineRows)),
      section("Compactions", "compactions", compactionsBox(id, s.compactions)),
      section("Forks", "fork-section", await forkTree(id, s)),
      BUNDLE && BUNDLE.eventsTruncated ? el("p", { class: "flag" }, "this page embeds only the first events") : null
    );
    markReady();
  }

  async function requestPage(id, at) {
    where.replaceChildren(" / ", link(`#/s/${enc(id)}`, id), ` / request as of seq ${at}`);
    const [msgs, header] = await Promise.all([
      api(`/api/sessions/${enc(id)}/messages?at=${at}`),
      api(`/api/sessions/${enc(id)}/header?at=${at}`),
    ]);
    app.replaceChildren(
      el("h1", {}, `What the model saw as of seq ${at}`),
      section(
        `${msgs.count} messages`,
        "messages",
        ...msgs.messages.map((m) =>
          el("div", { class: "message", "data-seq": m.seq }, el("h4", {}, `seq ${m.seq} · ${m.message.role}`), el("pre", { class: "json message-json" }, JSON.stringify(m.message)))
        )
      ),
      section("Request header (folded)", "request-header", el("p", { class: "muted" }, `from seq ${header.headerSeq}`), json(header.header), el("h3", {}, "context"), json(header.context))
    );
    markReady();
  }

  async function eventPage(id, seq) {
    where.replaceChildren(" / ", link(`#/s/${enc(id)}`, id), ` / event ${seq}`);
    const e = await eventAt(id, seq);
    app.replaceChildren(
      el("h1", {}, `Event ${seq}`),
      el("p", {}, link(`#/s/${enc(id)}/e/${Number(seq) - 1}`, "← previous"), " ", link(`#/s/${enc(id)}/e/${Number(seq) + 1}`, "next →")),
      el("pre", { class: "json", id: "raw" }, JSON.stringify(e, null, 2))
    );
    markReady();
  }

  // ---- readiness marks, read by the browser tests and the paint benchmark ----

  let currentHash = "#/";
  function markReady() {
    document.body.dataset.ready = currentHash;
  }
  function markPainted() {
    if (window.__firstTimelinePaint === undefined) window.__firstTimelinePaint = performance.now();
    document.body.dataset.painted = "1";
  }

  // ---- routing ----

  async function route() {
    delete document.body.dataset.ready;
    const hash = location.hash || (BUNDLE ? `#/s/${enc(BUNDLE.summary.id)}` : "#/");
    currentHash = hash;
    const parts = hash.slice(2).split("/").map(decodeURIComponent);
    try {
      if (parts[0] === "s" && parts[2] === "at") await requestPage(parts[1], parts[3]);
      else if (parts[0] === "s" && parts[2] === "e") await eventPage(parts[1], parts[3]);
      else if (parts[0] === "s" && parts[1]) await sessionPage(parts[1]);
      else await listPage();
    } catch (e) {
      fail(e);
      markReady();
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
