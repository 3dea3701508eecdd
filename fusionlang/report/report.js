// fusionlang report: pages, zoom, selection and search. Inlined into every report.
// Names from the model only ever reach the page as text (textContent), never as HTML.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var viewport = document.getElementById("viewport");
  var svgs = Array.prototype.slice.call(document.querySelectorAll("svg.graph"));
  var tables = Array.prototype.slice.call(document.querySelectorAll("section.page-table"));
  var pageButtons = Array.prototype.slice.call(document.querySelectorAll(".page-btn"));
  var viewButtons = Array.prototype.slice.call(document.querySelectorAll(".view-btn"));
  var details = document.getElementById("details");
  var search = document.getElementById("search");
  var results = document.getElementById("search-results");
  var current = 0;
  var view = document.body.dataset.view || "ops";
  var zoom = 1;

  // ----- pages and zoom ---------------------------------------------------------------
  function showPage(k) {
    current = Math.max(0, Math.min(data.pages - 1, k));
    // SVG elements have no .hidden property: set the attribute (CSS hides [hidden])
    svgs.forEach(function (svg) {
      svg.toggleAttribute("hidden", Number(svg.dataset.page) !== current || svg.dataset.view !== view);
    });
    tables.forEach(function (t) { t.hidden = Number(t.dataset.page) !== current; });
    pageButtons.forEach(function (b) { b.classList.toggle("current", Number(b.dataset.page) === current); });
    viewButtons.forEach(function (b) { b.classList.toggle("current", b.dataset.view === view); });
    applyZoom();
  }

  function visibleSvg() {
    return svgs.filter(function (svg) { return !svg.hasAttribute("hidden"); })[0] || null;
  }

  function setView(v) {
    view = v;
    document.body.dataset.view = v;
    showPage(current);
  }

  function applyZoom() {
    svgs.forEach(function (svg) {
      var w = Number(svg.dataset.width);
      var box = svg.viewBox.baseVal;
      svg.setAttribute("width", String(Math.round(w * zoom)));
      svg.setAttribute("height", String(Math.round(box.height * (w * zoom) / box.width)));
    });
  }

  function fit() {
    var svg = visibleSvg();
    if (!svg) { return; }
    var available = viewport.clientWidth - 20;
    zoom = Math.min(1.5, Math.max(0.1, available / Number(svg.dataset.width)));
    applyZoom();
  }

  function byId(id) { return id === null ? null : document.getElementById(id); }

  // ----- selection ----------------------------------------------------------------------
  function select(gid, nodeId, nodeName, scroll) {
    var page = data.groupPage[String(gid)];
    if (page === undefined) { return; }
    if (page !== current) { showPage(page); }
    document.querySelectorAll(".group.selected, .node.hit, tr.selected, tr.hit").forEach(function (el) {
      el.classList.remove("selected");
      el.classList.remove("hit");
    });
    document.querySelectorAll('.group[data-gid="' + Number(gid) + '"]').forEach(function (g) {
      g.classList.add("selected");
    });
    var box = byId((view === "ops" ? "g" : "c") + gid);
    var node = view === "ops" ? byId(nodeId) : null;
    if (nodeId !== null) {
      var opNode = byId(nodeId);
      if (opNode) { opNode.classList.add("hit"); }
    }
    document.querySelectorAll('.group-table tr[data-gid="' + Number(gid) + '"]').forEach(function (tr) {
      tr.classList.add("selected");
    });
    details.querySelectorAll("section.gdetail").forEach(function (s) {
      var match = s.dataset.gid === String(gid);
      s.hidden = !match;
      if (match && nodeName !== null) {
        s.querySelectorAll("tr[data-node]").forEach(function (tr) {
          if (tr.dataset.node === nodeName) { tr.classList.add("hit"); }
        });
      }
    });
    details.querySelector(".hint").hidden = true;
    details.scrollTop = 0;
    var target = node || box;
    if (scroll && target) { scrollToElement(target); }
  }

  function scrollToElement(el) {
    var vr = viewport.getBoundingClientRect();
    var er = el.getBoundingClientRect();
    viewport.scrollLeft += (er.left + er.width / 2) - (vr.left + vr.width / 2);
    viewport.scrollTop += (er.top + er.height / 2) - (vr.top + vr.height / 2);
    viewport.scrollIntoView({ block: "nearest" });
  }

  viewport.addEventListener("click", function (ev) {
    var el = ev.target;
    while (el && el !== viewport) {
      if (el.classList && el.classList.contains("port") && el.dataset.goto !== undefined) {
        select(Number(el.dataset.goto), null, null, true);
        return;
      }
      if (el.classList && el.classList.contains("node")) {
        var entry = nodeById[el.id];
        select(Number(el.dataset.gid), el.id, entry ? entry[0] : null, false);
        return;
      }
      if (el.classList && el.classList.contains("group")) {
        select(Number(el.dataset.gid), null, null, false);
        return;
      }
      el = el.parentNode;
    }
  });
  viewport.addEventListener("keydown", function (ev) {
    var el = ev.target;
    if (ev.key === "Enter" && el.classList && el.classList.contains("port") && el.dataset.goto !== undefined) {
      select(Number(el.dataset.goto), null, null, true);
    }
  });
  tables.forEach(function (t) {
    t.addEventListener("click", function (ev) {
      var tr = ev.target.closest("tr[data-gid]");
      if (tr) { select(Number(tr.dataset.gid), null, null, true); }
    });
  });

  // ----- search ---------------------------------------------------------------------------
  // entries: [name, op, group, page, element id, original ONNX names]
  var nodeById = {};
  data.nodes.forEach(function (n) { nodeById[n[4]] = n; });
  var active = 0;
  var shown = [];

  function matches(query) {
    var q = query.trim().toLowerCase();
    if (!q) { return []; }
    var out = [];
    var groupQuery = /^(?:g|group\s*)(\d+)$/.exec(q);
    if (groupQuery && data.groupPage[groupQuery[1]] !== undefined) {
      out.push({ group: Number(groupQuery[1]), label: "group " + groupQuery[1], where: "page " +
        (data.groupPage[groupQuery[1]] + 1) });
    }
    var exact = [], prefix = [], inside = [];
    data.nodes.forEach(function (n) {
      var name = n[0].toLowerCase();
      var hay = [name, n[1].toLowerCase()].concat(n[5].map(function (s) { return s.toLowerCase(); }));
      var item = { group: n[2], node: n[4], name: n[0], label: n[0], where: n[1] + " · g" + n[2] + " · page " + (n[3] + 1) };
      if (name === q || n[5].some(function (s) { return s.toLowerCase() === q; })) { exact.push(item); }
      else if (name.indexOf(q) === 0) { prefix.push(item); }
      else if (hay.some(function (s) { return s.indexOf(q) >= 0; })) { inside.push(item); }
    });
    return out.concat(exact, prefix, inside);
  }

  function render(list) {
    results.textContent = "";
    shown = list.slice(0, 50);
    if (!shown.length) {
      var none = document.createElement("li");
      none.className = "none";
      none.textContent = "no node matches";
      results.appendChild(none);
    }
    shown.forEach(function (item, k) {
      var li = document.createElement("li");
      li.dataset.index = String(k);
      if (k === active) { li.className = "active"; }
      var label = document.createElement("span");
      label.textContent = item.label;
      var where = document.createElement("span");
      where.className = "where";
      where.textContent = item.where;
      li.appendChild(label);
      li.appendChild(where);
      results.appendChild(li);
    });
    if (list.length > shown.length) {
      var more = document.createElement("li");
      more.className = "none";
      more.textContent = (list.length - shown.length) + " more: keep typing";
      results.appendChild(more);
    }
    results.hidden = false;
  }

  function choose(k) {
    var item = shown[k];
    if (!item) { return; }
    results.hidden = true;
    select(item.group, item.node || null, item.name || null, true);
  }

  search.addEventListener("input", function () {
    active = 0;
    if (!search.value.trim()) { results.hidden = true; return; }
    render(matches(search.value));
  });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); choose(active); }
    else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      active = Math.max(0, Math.min(shown.length - 1, active + (ev.key === "ArrowDown" ? 1 : -1)));
      render(matches(search.value));
    } else if (ev.key === "Escape") { results.hidden = true; }
  });
  results.addEventListener("mousedown", function (ev) {
    var li = ev.target.closest("li[data-index]");
    if (li) { ev.preventDefault(); choose(Number(li.dataset.index)); }
  });
  search.addEventListener("blur", function () { results.hidden = true; });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "/" && document.activeElement !== search) { ev.preventDefault(); search.focus(); }
  });

  // ----- toolbar ------------------------------------------------------------------------------
  pageButtons.forEach(function (b) {
    b.addEventListener("click", function () { showPage(Number(b.dataset.page)); });
  });
  viewButtons.forEach(function (b) {
    b.addEventListener("click", function () { setView(b.dataset.view); });
  });
  var prev = document.getElementById("prev-page");
  var next = document.getElementById("next-page");
  if (prev) { prev.addEventListener("click", function () { showPage(current - 1); }); }
  if (next) { next.addEventListener("click", function () { showPage(current + 1); }); }
  document.getElementById("zoom-in").addEventListener("click", function () { zoom = Math.min(3, zoom * 1.25); applyZoom(); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom = Math.max(0.1, zoom / 1.25); applyZoom(); });
  document.getElementById("zoom-fit").addEventListener("click", fit);

  showPage(0);
  // a graph wider than the viewport starts fitted to it
  var first = visibleSvg();
  if (first && Number(first.dataset.width) > viewport.clientWidth) { fit(); }
  // report.html#node=NAME opens on that node (names are matched, never interpreted)
  var wanted = /^#node=(.*)$/.exec(window.location.hash);
  if (wanted) {
    var name = wanted[1];
    try {
      name = decodeURIComponent(name);
    } catch (err) {
      // a malformed %-escape: look the text up as it is
    }
    var found = data.nodes.filter(function (n) { return n[0] === name; })[0] ||
      data.nodes.filter(function (n) { return n[5].indexOf(name) >= 0; })[0];
    if (found) { select(found[2], found[4], found[0], true); }
  }
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-group-boxes", String(document.querySelectorAll("rect.group-box").length));
}());
