"""``report.html``: one self-contained page (inline CSS, SVG and one small script, no network) from
``summary.json``.

Rendered with Jinja2, autoescape on: every student-influenced string (ids, failure messages) is
escaped, after :func:`grader.exports.outputs.clean_tree` has made every string safe text (a lone
surrogate in an old summary once made the page fail to encode, so no report and no exports, on every
rerun).

The only script is :data:`SORT_SCRIPT` (a column heading is a button: click it, or Tab to it and
press Enter or Space, to sort its table; ``#sort=<column>`` in the address sorts on load). The
page's Content-Security-Policy allows that script by its SHA-256 and nothing else: even a string
that escaped escaping could not run.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import jinja2
from markupsafe import Markup

from grader.exports.outputs import clean_tree

TEMPLATE = "report.html.j2"
SORT_SCRIPT = """
function sortBy(th, descending) {
  var table = th.closest("table"), col = Array.prototype.indexOf.call(th.parentNode.children, th);
  var bodies = Array.prototype.slice.call(table.tBodies);
  var rows = bodies.length > 1 ? bodies : Array.prototype.slice.call(table.tBodies[0].rows);
  var parent = bodies.length > 1 ? table : table.tBodies[0];
  function key(row) {
    var r = row.rows ? row.rows[0] : row, c = r.cells[col];
    return c.getAttribute("data-v") || c.textContent.trim();
  }
  rows.sort(function (a, b) {
    var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
    var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
    return descending ? -order : order;
  });
  rows.forEach(function (r) { parent.appendChild(r); });
  table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", descending ? "descending" : "ascending");
}
document.querySelectorAll("table.sortable th button").forEach(function (button) {
  var th = button.closest("th");
  button.addEventListener("click", function () { sortBy(th, th.getAttribute("aria-sort") === "ascending"); });
});
var wanted = /^#sort=([\\w-]+)$/.exec(location.hash);
var first = wanted && document.querySelector('th[data-col="' + wanted[1] + '"]');
if (first) { sortBy(first, true); }
"""


def script_hash() -> str:
    """The CSP source that allows :data:`SORT_SCRIPT` exactly as the template embeds it."""
    return "sha256-" + base64.b64encode(
        hashlib.sha256(SORT_SCRIPT.encode("utf-8")).digest()
    ).decode("ascii")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.exports", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda x: f"{100.0 * float(x):.0f}%"
    env.filters["num"] = lambda x: f"{float(x):g}"
    return env


def bars(
    histogram: list[dict[str, Any]],
    *,
    width: int = 560,
    height: int = 200,
    left: int = 44,
    top_pad: int = 22,
) -> dict[str, Any]:
    """Geometry of the histogram (the template only draws it): bars, y-axis ticks, plot box.

    ``top_pad`` leaves room above the tallest bar for its count, which must stay visible.
    """
    top = max((b["count"] for b in histogram), default=0) or 1
    plot = height - top_pad
    step = (width - left) / max(len(histogram), 1)
    out = []
    for i, b in enumerate(histogram):
        h = round(plot * b["count"] / top, 1)
        x = left + i * step
        out.append(
            {
                "x": round(x + 2, 1),
                "w": round(step - 4, 1),
                "y": round(top_pad + plot - h, 1),
                "h": h,
                "count": b["count"],
                "label": f"{b['from']:g}-{b['to']:g}",
                "tx": round(x + step / 2, 1),
            }
        )
    ticks = sorted({0, top // 2, top}) if top > 1 else [0, 1]
    return {
        "bars": out,
        "left": left,
        "right": width,
        "base": top_pad + plot,
        "top_pad": top_pad,
        "ticks": [{"value": t, "y": round(top_pad + plot - plot * t / top, 1)} for t in ticks],
    }


def render(summary: dict[str, Any]) -> str:
    summary = clean_tree(summary)
    rows = summary.get("students", [])
    exercise_ids = list(rows[0]["exercises"]) if rows else [e["id"] for e in summary["exercises"]]
    tests = sorted(
        ((e["id"], t) for e in summary["exercises"] for t in e["tests"]),
        key=lambda et: (et[1]["pass_rate"], et[0], et[1]["name"]),
    )
    findings = [{**f, "student": r["student"]} for r in rows for f in r.get("integrity", [])]
    findings.sort(key=lambda f: (f["severity"] != "withhold", f["student"], f["file"], f["line"]))
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            s=summary,
            chart=bars(summary["histogram"]),
            identical=summary.get("identical_submissions", []),
            findings=findings,
            similarity=summary.get("similarity"),
            students=rows,
            exercise_ids=exercise_ids,
            tests=tests,
            last=summary.get("last_graded_run"),
            script=Markup(SORT_SCRIPT),
            script_hash=script_hash(),
        )
    )
