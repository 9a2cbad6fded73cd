/* REPORT.html, tables: sortable (click a header; again to reverse; NULL sorts last either way) and filterable
   (a select per declared key, and free text over every cell). Each row keeps data-row = its index in the
   comparison.json list it came from, so a reader (and the browser tests) can match it to the file. */
"use strict";

function sortValue(v) {
  if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return null;
  if (typeof v === "boolean") return v ? 1 : 0;
  return v;
}

function compareValues(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), "en", {numeric: true});
}

/* spec: {id, rows, columns: [{key, label, value(r), cell(r, rows), title, cls}], filters: [{key, label, value(r)}],
          caption, search (default true), sortKey, sortDir} */
function dataTable(spec) {
  const rows = spec.rows || [];
  const cols = spec.columns;
  const wrap = h("div", {class: "np-table", "data-table": spec.id});
  if (spec.caption) wrap.append(h("p", {class: "caption"}, spec.caption));
  const bar = h("div", {class: "filters"});
  const count = h("span", {class: "count"});
  const state = {sortKey: spec.sortKey || null, dir: spec.sortDir || 1, filters: {}, text: ""};
  const table = h("table", {});
  const thead = h("thead", {});
  const tbody = h("tbody", {});
  const headRow = h("tr", {});
  const colValue = (c, r) => (c.value ? c.value(r) : r[c.key]);

  for (const c of cols) {
    const th = h("th", {scope: "col", "data-key": c.key, title: c.title || "sort by " + c.label, tabindex: 0,
                        class: c.cls || null},
      c.label, h("span", {class: "arrow"}));
    const sortBy = () => {
      state.dir = state.sortKey === c.key ? -state.dir : 1;
      state.sortKey = c.key;
      apply();
    };
    th.addEventListener("click", sortBy);
    th.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(); } });
    headRow.append(th);
  }
  thead.append(headRow);

  const trs = rows.map((r, i) => {
    const tr = h("tr", {"data-row": i});
    for (const c of cols) {
      const content = c.cell ? c.cell(r, rows) : fmt(r[c.key]);
      tr.append(h("td", {"data-key": c.key, class: c.cls || null}, content));
    }
    tr._row = r;
    tr._text = tr.textContent.toLowerCase();
    return tr;
  });
  tbody.append(...trs);
  table.append(thead, tbody);

  for (const f of spec.filters || []) {
    const values = distinct(rows.map((r) => (f.value ? f.value(r) : r[f.key])).map((v) => (v === null ? null : String(v))));
    if (values.length < 2) continue;  // nothing to choose between
    values.sort((a, b) => compareValues(a, b));
    const sel = h("select", {"data-filter": f.key, "aria-label": "filter by " + f.label},
      h("option", {value: ""}, `${f.label}: all`), values.map((v) => h("option", {value: v}, v)));
    sel.addEventListener("change", () => { state.filters[f.key] = {value: sel.value, get: f.value}; apply(); });
    bar.append(h("label", {}, sel));
  }
  if (spec.search !== false && rows.length > 1) {
    const input = h("input", {type: "search", placeholder: "filter rows…", "data-filter": "text",
                              "aria-label": "filter rows by text"});
    input.addEventListener("input", () => { state.text = input.value.trim().toLowerCase(); apply(); });
    bar.append(input);
  }
  bar.append(count);
  if (rows.length) wrap.append(bar);
  wrap.append(h("div", {class: "scroll"}, table));

  function apply() {
    let shown = 0;
    for (const tr of trs) {
      let ok = !state.text || tr._text.includes(state.text);
      for (const [key, f] of Object.entries(state.filters)) {
        if (!ok || !f.value) continue;
        const v = f.get ? f.get(tr._row) : tr._row[key];
        ok = v !== null && v !== undefined && String(v) === f.value;
      }
      tr.hidden = !ok;
      shown += ok ? 1 : 0;
    }
    count.textContent = `${shown} of ${trs.length} rows`;
    if (state.sortKey !== null) {
      const c = cols.find((x) => x.key === state.sortKey);
      const order = trs.slice().sort((a, b) => {
        const va = sortValue(colValue(c, a._row)), vb = sortValue(colValue(c, b._row));
        if (va === null && vb === null) return 0;
        if (va === null) return 1;
        if (vb === null) return -1;
        return state.dir * compareValues(va, vb);
      });
      tbody.append(...order);
      for (const th of headRow.children) {
        const on = th.dataset.key === state.sortKey;
        th.setAttribute("aria-sort", on ? (state.dir > 0 ? "ascending" : "descending") : "none");
      }
    }
  }
  apply();
  if (!rows.length) wrap.append(h("p", {class: "none"}, "No rows."));
  return wrap;
}

/* a column whose cell is a value with its interval (key_ci_low / key_ci_high), the bar on the column's scale */
function ciColumn(key, label, extra) {
  return Object.assign({key, label, value: (r) => r[key], cls: "n",
    cell: (r, rows) => {
      const scale = (rows._scales = rows._scales || {})[key] || (rows._scales[key] = scaleOf(rows, key));
      return ciCell(r[key], r[key + "_ci_low"], r[key + "_ci_high"], scale);
    }}, extra || {});
}

function numColumn(key, label, extra) {
  return Object.assign({key, label, cls: "n", cell: (r) => fmt(r[key])}, extra || {});
}

function textColumn(key, label, extra) {
  return Object.assign({key, label, cell: (r) => (r[key] === null || r[key] === undefined ? h("span", {class: "null"}, "NULL") : String(r[key]))}, extra || {});
}

function badgeColumn(key, label, extra) {
  return Object.assign({key, label, cell: (r) => badge(extra && extra.text ? extra.text(r) : r[key])}, extra || {});
}

/* every scalar column of rows, for a section whose shape this page does not know (accuracy, when present) */
function genericColumns(rows) {
  const keys = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  const cols = [];
  for (const k of keys) {
    if (/_ci_(low|high)$/.test(k) && keys.includes(k.replace(/_ci_(low|high)$/, ""))) continue;
    if (/(^|_)verdict$/.test(k) || k === "status") cols.push(badgeColumn(k, k));
    else if (keys.includes(k + "_ci_low") || keys.includes(k + "_ci_high")) cols.push(ciColumn(k, k));
    else if (rows.some((r) => typeof r[k] === "number")) cols.push(numColumn(k, k));
    else cols.push(textColumn(k, k, {cell: (r) => nestedCell(r[k])}));
  }
  return cols;
}

/* a nested value in a generic table: folded, its JSON on demand (a list of rows is a table of its own elsewhere) */
function nestedCell(v) {
  if (v === null || typeof v !== "object") return fmt(v);
  const n = Array.isArray(v) ? v.length : Object.keys(v).length;
  if (!n) return Array.isArray(v) ? "[]" : "{}";
  return h("details", {class: "nested"}, h("summary", {}, `${n} ${Array.isArray(v) ? "item" : "field"}${n === 1 ? "" : "s"}`),
    h("code", {}, JSON.stringify(v, null, 1)));
}
