"""``report.html``: one self-contained page (inline CSS and SVG, no script, no network) from ``summary.json``.

Rendered with Jinja2, autoescape on: every student-influenced string (ids, failure messages) is escaped,
after :func:`grader.batch.outputs.clean_tree` has made every string safe text (a lone surrogate in an
old summary once made the page fail to encode, so no report and no exports, on every rerun).
"""

from __future__ import annotations

from typing import Any

import jinja2

from grader.batch.outputs import clean_tree

TEMPLATE = "report.html.j2"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("grader.batch", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda x: f"{100.0 * float(x):.0f}%"
    env.filters["num"] = lambda x: f"{float(x):g}"
    return env


def bars(histogram: list[dict[str, Any]], *, width: int = 520, height: int = 180) -> list[dict[str, Any]]:
    """Geometry of the histogram's SVG bars (the template only draws them)."""
    top = max((b["count"] for b in histogram), default=0) or 1
    step = width / max(len(histogram), 1)
    out = []
    for i, b in enumerate(histogram):
        h = round((height - 20) * b["count"] / top, 1)
        out.append({"x": round(i * step + 2, 1), "w": round(step - 4, 1), "y": round(height - 20 - h, 1), "h": h,
                    "count": b["count"], "label": f"{b['from']:g}-{b['to']:g}%", "tx": round(i * step + step / 2, 1)})
    return out


def render(summary: dict[str, Any]) -> str:
    summary = clean_tree(summary)
    return _environment().get_template(TEMPLATE).render(s=summary, bars=bars(summary["histogram"]),
                                                        identical=summary.get("identical_submissions", []))
