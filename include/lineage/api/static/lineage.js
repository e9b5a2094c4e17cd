/* The lineage page: Cytoscape.js draws the graph, cytoscape-dagre lays it out (no layout code here).
 * Data comes from the lineage store over HTTP (inside Airflow: LINEAGE_API) or, in the exported single file, from
 * LINEAGE_BUNDLE, which holds the same answers computed in advance. */
(function () {
  "use strict";

  const BUNDLE = window.LINEAGE_BUNDLE || null;
  const API = window.LINEAGE_API || "ui/";
  const params = new URLSearchParams(window.location.search);
  const $ = (id) => document.getElementById(id);

  async function get(path) {
    const response = await fetch(API + path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) {
      let detail = response.statusText;
      try { detail = (await response.json()).detail || detail; } catch (e) { /* not JSON */ }
      throw new Error(`${path}: HTTP ${response.status}: ${detail}`);
    }
    return response.json();
  }

  const enc = encodeURIComponent;
  const api = {
    graph: async (asOf) => {
      if (!BUNDLE) return get(asOf ? `graph?asOf=${enc(asOf)}` : "graph");
      return asOf ? bundleGraphAt(asOf) : BUNDLE.graph;
    },
    provenance: async (runId) => {
      if (!BUNDLE) return get(`provenance?run=${enc(runId)}`);
      const found = (BUNDLE.provenance || {})[runId];
      if (!found) throw new Error("this exported file holds the provenance of the runs its pages list only");
      return found;
    },
    node: async (id) => (BUNDLE ? BUNDLE.details[id] : get(`node?id=${enc(id)}`)),
    impact: async (id) => (BUNDLE ? BUNDLE.impact[id] : get(`impact?id=${enc(id)}`)),
    columns: async (ref) => {
      if (!BUNDLE) return get(`columns?id=${enc(ref)}`);
      if (!BUNDLE.columns[ref]) throw new Error(`no column lineage for ${ref} in this file`);
      return BUNDLE.columns[ref];
    },
    diff: async (a, b) => {
      if (!BUNDLE) return get(`diff?a=${enc(a)}&b=${enc(b)}`);
      const found = BUNDLE.diffs[`${a}|${b}`];
      if (!found) throw new Error("this exported file holds the comparisons of a job's five newest runs only");
      return found;
    },
  };

  // The exported file draws the graph as of a time by the rule the store applies (data.py's graph(asOf)): jobs and
  // datasets first seen by then; each job as its latest run started by then (start, then run id), with that run's
  // datasets first seen by then and the last state it reported by then; each dataset's latest version by then.
  // Times are the store's fixed-width UTC text, so comparing strings compares instants.
  function bundleGraphAt(asOf) {
    const data = BUNDLE.asOf;
    const present = (key) => key in data.created && (data.created[key] === null || data.created[key] <= asOf);
    const latest = new Map();  // job -> [start, run id, run]
    for (const [id, job, start, inputs, outputs, states] of data.runs) {
      if (start === null || start > asOf) continue;
      const best = latest.get(job);
      if (!best || start > best[0] || (start === best[0] && id > best[1])) latest.set(job, [start, id, { inputs, outputs, states }]);
    }
    const edges = new Map();
    const stateOf = new Map();
    for (const [job, [, , run]] of latest) {
      for (const [side, list] of [["input", run.inputs], ["output", run.outputs]]) {
        for (const dataset of list) {
          if (data.created[dataset] !== null && data.created[dataset] !== undefined && data.created[dataset] > asOf) continue;
          const [source, target] = side === "input" ? [dataset, job] : [job, dataset];
          edges.set(`${source}\u0000${target}`, { source, target });
        }
      }
      let state = null;
      for (const [time, reported] of run.states) if (time <= asOf) state = reported;
      stateOf.set(job, state);
    }
    const nodes = [];
    for (const node of BUNDLE.graph.nodes) {
      if (!present(node.id)) continue;
      const item = { ...node };
      if (node.kind === "job") item.state = stateOf.has(node.id) ? stateOf.get(node.id) : null;
      else {
        const versions = (data.versions[node.id] || []).filter(([when]) => when <= asOf);
        item.version = versions.length ? versions[versions.length - 1][1] : null;
        // blocked then: a blocked audit by then whose branch was not yet published, discarded or audited again
        const span = (data.blocked || []).find(([key, since, until]) => key === node.id && since !== null && since <= asOf
          && (until === null || until > asOf));
        if (span) item.blocked = span[3]; else delete item.blocked;
      }
      if (item.parent && !present(item.parent)) { delete item.parent; item.label = item.fullName; }
      nodes.push(item);
    }
    const kept = new Set(nodes.map((n) => n.id));
    return { asOf, nodes, edges: [...edges.values()].filter((e) => kept.has(e.source) && kept.has(e.target)), runs: BUNDLE.graph.runs };
  }

  // <input type="datetime-local"> value (read as UTC) <-> the store's instant text (2025-03-01T03:00:00.000000Z)
  function toInstant(local) {
    const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d)(?::(\d\d)(?:\.(\d+))?)?$/.exec(local || "");
    if (!m) return null;
    return `${m[1]}:${m[2] || "00"}.${(m[3] || "").padEnd(6, "0").slice(0, 6)}Z`;
  }
  const toLocal = (instant) => (instant || "").replace(/(\.\d+)?Z$/, "").slice(0, 19);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function showError(error) {
    const box = $("error");
    box.textContent = String(error && error.message ? error.message : error);
    box.hidden = false;
    setTimeout(() => { box.hidden = true; }, 8000);
  }

  const fmtNumber = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : n ?? "—");
  const fmtBytes = (n) => (typeof n === "number" ? (n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`) : "—");
  const fmtTime = (t) => (t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—");
  const state = (s) => h("span", { class: `state ${s || ""}` }, s || "—");
  const table = (head, rows) => h("table", {}, h("tr", {}, head.map((c) => h("th", {}, c))), rows);

  // ------------------------------------------------------------------ graph
  const STYLE = [
    { selector: "node", style: {
      label: "data(label)", "font-size": 11, "text-valign": "center", "text-halign": "center", "text-wrap": "ellipsis",
      "text-max-width": "data(textWidth)", width: "data(width)", height: 30, shape: "round-rectangle",
      "border-width": 1.5, "background-color": "#d6ebff", "border-color": "#1c6dd0", color: "#102a43" } },
    { selector: "node.file", style: { "background-color": "#f0f4f8", "border-color": "#7b8794", "border-style": "dashed" } },
    { selector: "node.job", style: { shape: "rectangle", "background-color": "#ffe8cc", "border-color": "#d9822b" } },
    { selector: "node.spark", style: { shape: "cut-rectangle", "background-color": "#efe4ff", "border-color": "#7c3aed" } },
    { selector: "node.dag", style: { shape: "round-rectangle", "background-color": "#fafafa", "background-opacity": 0.6,
      "border-color": "#9aa5b1", "border-style": "dashed", "text-valign": "top", "text-halign": "center", "font-weight": 600,
      "font-size": 12, padding: 14, "text-margin-y": -4 } },
    { selector: "node.FAILED", style: { "border-color": "#c62828", "border-width": 3 } },
    // a table whose newest audit kept its data on a branch (write-audit-publish): waiting for review
    { selector: "node.blocked", style: { "background-color": "#fff0f0", "border-color": "#c92a2a", "border-width": 4,
      "border-style": "double", color: "#8a1c1c", "font-weight": 600 } },
    { selector: "edge", style: { width: 1.4, "line-color": "#9aa5b1", "target-arrow-color": "#9aa5b1",
      "target-arrow-shape": "triangle", "curve-style": "bezier", "arrow-scale": 0.9 } },
    { selector: ".hidden", style: { display: "none" } },
    { selector: "node:selected", style: { "border-width": 3, "border-color": "#0b3d91", "overlay-opacity": 0 } },
    { selector: ".faded", style: { opacity: 0.18 } },
    { selector: "node.impact-source", style: { "background-color": "#ffd43b", "border-color": "#b08900", "border-width": 3 } },
    { selector: "node.impacted", style: { "background-color": "#ffc9c9", "border-color": "#c92a2a", "border-width": 3 } },
    { selector: "edge.impacted", style: { "line-color": "#c92a2a", "target-arrow-color": "#c92a2a", width: 2.5 } },
  ];

  let cy = null;
  let graphData = null;

  function elementsOf(data) {
    const elements = [];
    for (const node of data.nodes) {
      const classes = [node.kind, node.level, node.state, node.blocked ? "blocked" : null].filter(Boolean).join(" ");
      const label = node.blocked ? `${node.label} [BLOCKED]` : node.label;  // the badge
      const width = node.level === "dag" ? undefined : Math.max(90, Math.min(300, label.length * 6.6 + 24));
      elements.push({ group: "nodes", classes, data: { ...node, label, plainLabel: node.label, width: width || 90, textWidth: (width || 300) - 12 } });
    }
    for (const edge of data.edges) {
      elements.push({ group: "edges", data: { id: `${edge.source}->${edge.target}`, source: edge.source, target: edge.target } });
    }
    return elements;
  }

  function applyFilters() {
    const showSpark = $("show-spark").checked;
    const showFiles = $("show-files").checked;
    const dag = params.get("dag");
    cy.batch(() => {
      cy.elements().removeClass("hidden");
      if (!showSpark) cy.nodes(".spark").addClass("hidden");
      if (!showFiles) cy.nodes(".file").addClass("hidden");
      if (dag) {
        const dagNode = cy.nodes(".dag").filter((n) => n.data("name") === dag);
        const tasks = dagNode.children();
        const keep = dagNode.union(tasks).union(tasks.incomers("node")).union(tasks.outgoers("node"));
        cy.nodes().difference(keep).addClass("hidden");
        if (showSpark) cy.nodes(".spark").removeClass("hidden");
      }
      // a DAG box with no visible task, or an edge to a hidden node, goes too
      cy.nodes(".dag").forEach((n) => { if (n.children().not(".hidden").empty()) n.addClass("hidden"); });
      cy.edges().forEach((e) => { if (e.source().hasClass("hidden") || e.target().hasClass("hidden")) e.addClass("hidden"); });
    });
    layout();
  }

  function layout() {
    cy.elements().not(".hidden").layout({
      name: "dagre", rankDir: "LR", nodeSep: 14, rankSep: 70, edgeSep: 8, padding: 20, fit: true, animate: false,
    }).run();
  }

  function clearHighlight() {
    cy.elements().removeClass("faded impacted impact-source");
  }

  async function highlightImpact(id) {
    const result = await api.impact(id);
    clearHighlight();
    const ids = new Set(result.downstream.map((d) => d.id));
    cy.batch(() => {
      cy.elements().addClass("faded");
      const source = cy.getElementById(id);
      source.removeClass("faded").addClass("impact-source");
      cy.nodes().filter((n) => ids.has(n.id())).removeClass("faded").addClass("impacted");
      cy.edges().filter((e) => (ids.has(e.target().id()) && (ids.has(e.source().id()) || e.source().id() === id)))
        .removeClass("faded").addClass("impacted");
      cy.nodes(".dag").filter((n) => n.children(".impacted").nonempty()).removeClass("faded");
    });
    $("scope").textContent = `impact of ${cy.getElementById(id).data("label")}: ${ids.size} nodes downstream`;
    return result;
  }

  // ------------------------------------------------------------------ detail pane
  async function openDetail(id) {
    const detail = await api.node(id);
    const body = $("detail-body");
    body.replaceChildren();
    $("detail").hidden = false;
    cy.resize();
    body.append(
      h("h2", { id: "detail-title" }, detail.label),
      h("div", { class: "id" }, `${detail.kind} · ${detail.id}`),
      h("div", { class: "actions" },
        h("button", { type: "button", id: "impact-button", onclick: () => highlightImpact(id).catch(showError) }, "Highlight impact"),
        detail.kind === "dataset" && detail.lineageColumns && detail.lineageColumns.length
          ? h("span", {}, h("select", { id: "column-select", "aria-label": "column" },
              detail.lineageColumns.map((c) => h("option", { value: c }, c))),
            " ", h("button", { type: "button", id: "columns-button",
              onclick: () => openColumns(`${id}.${$("column-select").value}`).catch(showError) }, "Column lineage"))
          : null),
    );
    if (detail.kind === "dataset") renderDataset(body, detail);
    else renderJob(body, detail);
    renderInvalidFacets(body, detail);
    cy.elements().unselect();
    cy.getElementById(id).select();
  }

  // The facets the OpenLineage spec refused in this node's events: kept with the events as received, not read.
  function renderInvalidFacets(body, d) {
    const problems = d.invalidFacets || [];
    if (!problems.length) return;
    body.append(h("section", { id: "invalid-facets", class: "invalid-facets" },
      h("h3", {}, `Invalid facets (${problems.length}): kept with their events, not read`),
      table(["event", "run", "where", "why"], problems.map((p) => h("tr", { class: "invalid-facet", "data-facet": p.facet || "" },
        h("td", {}, fmtTime(p.eventTime)), h("td", { class: "mono" }, (p.runId || "—").slice(0, 8)),
        h("td", { class: "mono" }, p.path), h("td", {}, p.rule))))));
  }

  function renderBlocked(body, b) {
    const failed = b.failed || [];
    body.append(h("section", { id: "blocked", class: "blocked", "data-branch": b.branch },
      h("h3", {}, "Blocked: not published"),
      h("p", {}, "Its newest audit failed ", String((b.blocking || []).length), " blocking expectation(s): main was left where it was, ",
        "and the data is kept on branch ", h("code", { id: "blocked-branch" }, b.branch),
        ` for review (run ${(b.runId || "—").slice(0, 8)}, ${fmtTime(b.since)}).`),
      failed.length ? table(["expectation", "observed", "threshold", "severity"], failed.map((f) => h("tr", { class: "failed-expectation" },
        h("td", { class: "mono" }, f.name), h("td", { class: "num" }, f.observed ?? "—"), h("td", { class: "num" }, f.threshold ?? "—"),
        h("td", { class: f.severity === "error" ? "bad" : "" }, f.severity === "error" ? "block (error)" : `${f.severity} (warn)`)))) : null,
      b.publish ? h("p", {}, "After review: ", h("code", {}, b.publish), " or ", h("code", {}, b.discard)) : null));
  }

  function renderDataset(body, d) {
    if (d.blocked) renderBlocked(body, d.blocked);
    if (d.statistics) {
      body.append(h("h3", {}, "Statistics (latest write)"), table(["rows", "files", "size"], [h("tr", {},
        h("td", { class: "num", id: "stat-rows" }, fmtNumber(d.statistics.rowCount)), h("td", { class: "num" }, fmtNumber(d.statistics.fileCount)),
        h("td", { class: "num" }, fmtBytes(d.statistics.size)))]));
    }
    body.append(h("h3", {}, `Versions (Iceberg snapshots)${d.currentVersion ? "" : ": none recorded"}`));
    if (d.versions.length) {
      body.append(table(["snapshot id", "written", "rows", "by run"], d.versions.map((v) => h("tr", { class: v.current ? "current" : "" },
        h("td", { class: "mono snapshot-id" }, v.version, v.current ? " (current)" : ""), h("td", {}, fmtTime(v.createdAt)),
        h("td", { class: "num" }, fmtNumber(v.outputStatistics && v.outputStatistics.rowCount)),
        h("td", { class: "mono" }, (v.runId || "—").slice(0, 8))))));
    }
    const assertions = (d.dataQuality.dataQualityAssertions || {}).assertions || [];
    const metrics = (d.dataQuality.dataQualityMetrics || {}).columnMetrics || {};
    if (assertions.length || Object.keys(metrics).length) {
      body.append(h("h3", {}, "Data quality"));
      if (assertions.length) {
        body.append(table(["assertion", "column", "actual", "expected", "result"], assertions.map((a) => h("tr", {},
          h("td", {}, a.assertion), h("td", {}, a.column || ""), h("td", { class: "num" }, a.actual ?? ""), h("td", { class: "num" }, a.expected ?? ""),
          h("td", { class: a.success ? "ok" : "bad" }, a.success ? "passed" : "FAILED")))));
      }
      const names = Object.keys(metrics);
      if (names.length) {
        body.append(table(["column", "nulls", "distinct", "min", "max"], names.map((c) => h("tr", {}, h("td", {}, c),
          h("td", { class: "num" }, fmtNumber(metrics[c].nullCount)), h("td", { class: "num" }, fmtNumber(metrics[c].distinctCount)),
          h("td", { class: "num" }, metrics[c].min ?? ""), h("td", { class: "num" }, metrics[c].max ?? "")))));
      }
    }
    if (d.schema.length) {
      body.append(h("h3", {}, `Schema (${d.schema.length} columns)`),
        table(["column", "type"], d.schema.map((f) => h("tr", {}, h("td", { class: "mono" }, f.name), h("td", { class: "mono" }, f.type)))));
    }
    renderRuns(body, d, "Runs that wrote it");
  }

  function renderJob(body, d) {
    if (d.documentation) body.append(h("p", {}, d.documentation));
    if (d.sourceCodeLocation) body.append(h("p", {}, "source: ", h("code", {}, d.sourceCodeLocation)));
    renderRuns(body, d, `Recent runs (${d.runCount} in all)`);
  }

  function renderRuns(body, d, title) {
    body.append(h("h3", {}, title));
    if (!d.runs.length) { body.append(h("p", {}, "none")); return; }
    const rows = d.runs.map((r) => h("tr", { "data-run": r.id },
      h("td", {}, h("input", { type: "checkbox", class: "compare", value: r.id, "aria-label": `compare ${r.id}` })),
      h("td", { class: "mono" }, r.id.slice(0, 8)), h("td", {}, state(r.state)), h("td", {}, fmtTime(r.startedAt)),
      h("td", {}, r.inputs.map((i) => i.label).concat([]).length ? `${r.inputs.length} in / ${r.outputs.length} out` : `${r.outputs.length} out`),
      h("td", { class: "bad" }, r.errorMessage ? r.errorMessage.split("\n")[0].slice(0, 120) : ""),
      h("td", {}, h("button", { type: "button", class: "provenance-button", "data-run": r.id,
        onclick: () => openProvenance(r.id).catch(showError) }, "provenance"))));
    body.append(table(["", "run", "state", "started", "datasets", "error", ""], rows));
    if (d.kind === "job" && d.runs.length > 1) {
      body.append(h("div", { class: "actions" }, h("button", { type: "button", id: "compare-button", onclick: () => compareSelected(d).catch(showError) },
        "Compare the two selected runs")), h("div", { id: "diff" }));
    }
  }

  async function compareSelected(d) {
    const picked = [...document.querySelectorAll("input.compare:checked")].map((box) => box.value);
    if (picked.length !== 2) throw new Error("select exactly two runs to compare");
    const order = d.runs.map((r) => r.id);
    picked.sort((a, b) => order.indexOf(b) - order.indexOf(a)); // older first (runs are newest first)
    const result = await api.diff(picked[0], picked[1]);
    const [a, b] = result.runs;
    const c = result.changes;
    const rows = [];
    const row = (label, x, y, changed) => rows.push(h("tr", { class: changed ? "changed" : "" }, h("th", {}, label),
      h("td", { class: "mono" }, x ?? "—"), h("td", { class: "mono" }, y ?? "—")));
    row("run", a.id.slice(0, 8), b.id.slice(0, 8), false);
    row("state", a.state, b.state, "state" in c);
    row("job version", (a.jobVersion || "").slice(0, 12), (b.jobVersion || "").slice(0, 12), "jobVersion" in c);
    row("code", (a.codeHash || "").slice(0, 12), (b.codeHash || "").slice(0, 12), "codeHash" in c);
    for (const [key, [x, y]] of Object.entries(c.parameters || {})) row(`param ${key}`, JSON.stringify(x), JSON.stringify(y), true);
    for (const direction of ["inputs", "outputs"]) {
      const part = c[direction];
      for (const item of part.added) row(`${direction.slice(0, -1)} +`, "", `${item.dataset} @ ${item.version || ""}`, true);
      for (const item of part.removed) row(`${direction.slice(0, -1)} −`, `${item.dataset} @ ${item.version || ""}`, "", true);
      for (const item of part.changed) row(`${direction.slice(0, -1)} ~ ${item.dataset}`, item.from, item.to, true);
      for (const item of part.same) row(`${direction.slice(0, -1)} = ${item.dataset}`, item.version, item.version, false);
    }
    for (const [dataset, change] of Object.entries(c.schema || {})) {
      row(`schema ${dataset}`, change.removed.join(", "), change.added.concat(change.changed).join(", "), true);
    }
    if ("errorMessage" in c) row("error", (c.errorMessage[0] || "").slice(0, 80), (c.errorMessage[1] || "").slice(0, 80), true);
    $("diff").replaceChildren(h("h3", {}, "A → B"), h("table", { id: "diff-table" }, rows));
  }

  // ------------------------------------------------------------------ column view
  async function openColumns(ref) {
    const result = await api.columns(ref);
    $("columns-view").hidden = false;
    $("columns-title").textContent = `Column lineage of ${ref.split(":").pop()}`;
    const datasets = new Map(graphData.nodes.filter((n) => n.kind === "dataset").map((n) => [`${n.namespace}:${n.name}`, n.label]));
    const elements = [];
    for (const node of result.graph) {
      const d = node.data;
      const table = datasets.get(`${d.namespace}:${d.dataset}`) || d.dataset.split("/").pop();
      const label = `${table}.${d.field}`;
      elements.push({ group: "nodes", data: { id: node.id, label, width: Math.max(120, label.length * 6.6 + 24), textWidth: 400 } });
      for (const edge of node.inEdges) elements.push({ group: "edges", data: { id: `${edge.origin}->${edge.destination}`, source: edge.origin, target: edge.destination } });
    }
    const view = cytoscape({ container: $("columns-graph"), elements, style: STYLE });
    view.nodes().first().addClass("impact-source");
    view.layout({ name: "dagre", rankDir: "RL", nodeSep: 10, rankSep: 60, padding: 20, animate: false }).run();
    window.lineageColumnGraph = view;
  }

  // ------------------------------------------------------------------ provenance view
  const runLine = (entry) => `run ${entry.run.id.slice(0, 8)} · ${entry.job.name} · ${entry.run.status || "—"} · `
    + `${fmtTime(entry.run.start)} → ${fmtTime(entry.run.end)}`;

  async function openProvenance(runId) {
    const result = await api.provenance(runId);
    const entries = new Map(result.runs.map((entry) => [entry.run.id, entry]));
    const root = result.runs[0];
    const expanded = new Set([root.run.id]);
    const runItem = (entry, note) => h("span", { class: "prov-run", "data-run": entry.run.id }, runLine(entry), note || "");

    function reads(entry) {
      const list = h("ul", {});
      for (const item of entry.inputs) {
        const writer = item.producedByRunId;
        const version = item.version ? h("span", { class: "version mono" }, `snapshot ${item.version}`) : h("span", { class: "prov-note" }, "unversioned");
        const how = item.resolvedBy === "latest write before the run" ? h("span", { class: "prov-note" }, " (latest write before the run)") : null;
        const read = h("li", { class: "prov-read", "data-dataset": item.name, "data-version": item.version || "", "data-writer": writer || "" },
          "read ", h("strong", {}, item.label || `${item.namespace}:${item.name}`), " ", version,
          item.versionTime ? ` written ${fmtTime(item.versionTime)}` : "", how);
        const inner = h("ul", {});
        if (!writer) inner.append(h("li", { class: "prov-note" }, "written by: no run in the store"));
        else if (writer === entry.run.id) inner.append(h("li", { class: "prov-note" }, "written by this run"));
        else if (!entries.has(writer)) inner.append(h("li", { class: "prov-note" }, `written by run ${writer} (beyond the depth asked)`));
        else if (expanded.has(writer)) inner.append(h("li", {}, "written by ", runItem(entries.get(writer), " (see above)")));
        else {
          expanded.add(writer);
          inner.append(h("li", {}, "written by ", runItem(entries.get(writer)), reads(entries.get(writer))));
        }
        read.append(inner);
        list.append(read);
      }
      return list;
    }

    const body = $("provenance-body");
    body.replaceChildren(h("ul", {}, h("li", {}, runItem(root), reads(root))));
    if (!root.inputs.length) {
      body.append(h("p", { class: "prov-note" }, "It read no datasets itself."));
      if (result.children.length) {
        body.append(h("p", {}, "Its task runs (each with its own provenance):"), h("ul", { id: "provenance-children" },
          result.children.map((child) => h("li", {}, h("button", { type: "button", class: "child-provenance", "data-run": child.id,
            onclick: () => openProvenance(child.id).catch(showError) }, `${child.job} · ${child.state || "—"} · ${fmtTime(child.startedAt)}`)))));
      }
    }
    const lineage = result.completeness;
    if (lineage) {  // a DAG run: is its lineage complete, or what is missing
      body.append(h("section", { id: "completeness", class: lineage.complete ? "complete" : "incomplete" },
        h("h3", {}, lineage.complete ? `Lineage complete (${lineage.runs} runs)` : `Lineage incomplete: ${lineage.missing.length} missing`),
        lineage.missing.length ? h("ul", {}, lineage.missing.map((m) => h("li", { class: "missing", "data-kind": m.kind, "data-run": m.runId },
          h("strong", {}, m.kind), ` · ${m.job} (run ${m.runId.slice(0, 8)}): ${m.detail}`))) : null));
    }
    $("provenance-title").textContent = `Provenance of run ${root.run.id} (${root.job.name}): dataset versions read, the runs that wrote them, …`;
    $("provenance-view").hidden = false;
    document.body.dataset.provenance = root.run.id;
  }

  // ------------------------------------------------------------------ as of a time, or a run
  let asOf = null;

  function draw(data) {
    graphData = data;
    const jobs = data.nodes.filter((n) => n.kind === "job").length;
    $("summary").textContent = `${data.nodes.length - jobs} datasets, ${jobs} jobs${BUNDLE ? ` · exported ${BUNDLE.exportedAt}` : ""}`;
    $("node-names").replaceChildren(...data.nodes.map((n) => h("option", { value: n.label })));
    if (!cy) {
      cy = cytoscape({ container: $("graph"), elements: elementsOf(data), style: STYLE, minZoom: 0.1, maxZoom: 3 });
      window.lineageGraph = cy;
    } else {
      cy.batch(() => { cy.elements().remove(); cy.add(elementsOf(data)); });
      applyFilters();
    }
  }

  async function showAsOf(instant, label) {
    document.body.dataset.ready = "loading";
    try {
      const data = await api.graph(instant);
      asOf = instant;
      draw(data);
      document.body.classList.toggle("as-of", Boolean(instant));
      $("as-of-label").textContent = instant ? `as of ${fmtTime(instant)}${label ? ` (${label})` : ""}` : "";
      document.body.dataset.asOf = instant || "";
    } finally {
      document.body.dataset.ready = "true";
    }
  }

  function fillRunPicker(runs) {
    $("as-of-run").replaceChildren(h("option", { value: "" }, "or as of a run…"),
      ...(runs || []).map((run) => h("option", { value: run.id }, `${run.job} · ${fmtTime(run.startedAt)} · ${run.state || "—"}`)));
  }

  function wireAsOf() {
    $("as-of").addEventListener("change", () => {
      const instant = toInstant($("as-of").value);
      if (!instant) { showError(`not a time: ${$("as-of").value}`); return; }
      $("as-of-run").value = "";
      $("run-provenance").disabled = true;
      showAsOf(instant).catch(showError);
    });
    $("as-of-run").addEventListener("change", () => {
      const run = (graphData.runs || []).find((r) => r.id === $("as-of-run").value);
      $("run-provenance").disabled = !run;
      if (!run) return;
      const instant = run.endedAt || run.startedAt;  // the graph as that run left it
      $("as-of").value = toLocal(instant);
      showAsOf(instant, `${run.job} run ${run.id.slice(0, 8)}`).catch(showError);
    });
    $("as-of-now").addEventListener("click", () => {
      $("as-of").value = ""; $("as-of-run").value = ""; $("run-provenance").disabled = true;
      showAsOf(null).catch(showError);
    });
    $("run-provenance").addEventListener("click", () => {
      if ($("as-of-run").value) openProvenance($("as-of-run").value).catch(showError);
    });
    $("close-provenance").addEventListener("click", () => { $("provenance-view").hidden = true; });
  }

  // ------------------------------------------------------------------ start
  async function start() {
    draw(await api.graph());
    fillRunPicker(graphData.runs);
    wireAsOf();
    if (params.get("dag")) $("scope").textContent = `DAG ${params.get("dag")}`;
    applyFilters();
    // on the core, so a tap on a task inside its DAG box arrives once (events bubble to compound parents)
    cy.on("tap", (event) => { if (event.target !== cy && event.target.isNode()) openDetail(event.target.id()).catch(showError); });
    $("show-spark").addEventListener("change", applyFilters);
    $("show-files").addEventListener("change", applyFilters);
    $("fit").addEventListener("click", () => cy.fit(cy.elements().not(".hidden"), 20));
    $("clear").addEventListener("click", () => { clearHighlight(); $("scope").textContent = params.get("dag") ? `DAG ${params.get("dag")}` : ""; });
    $("close-detail").addEventListener("click", () => { $("detail").hidden = true; cy.resize(); });
    $("close-columns").addEventListener("click", () => { $("columns-view").hidden = true; });
    $("search").addEventListener("change", () => {
      const wanted = $("search").value.trim();
      const match = cy.nodes().filter((n) => n.data("plainLabel") === wanted || n.data("fullName") === wanted || n.id() === wanted).first();
      if (match.nonempty()) { cy.animate({ center: { eles: match }, zoom: 1.2 }, { duration: 200 }); openDetail(match.id()).catch(showError); }
    });
    document.body.dataset.ready = "true";
  }

  start().catch((error) => { showError(error); document.body.dataset.ready = "error"; });
})();
