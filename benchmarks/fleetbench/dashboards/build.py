"""Render the dashboard model to Grafana JSON with grafana-foundation-sdk (schema of Grafana 11.6)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import barchart, bargauge, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import dashboard as sdk
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    FieldColorModeId,
    GridPos,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from fleetbench import jsonio
from fleetbench.dashboards.definition import Dashboard, Panel, Variable
from fleetbench.errors import UserError
from fleetbench.fsutil import ensure_writable_dir, readable_file

GRID_WIDTH = 24
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
PANEL_BUILDERS: dict[str, Any] = {
    "timeseries": timeseries.Panel,
    "stat": stat.Panel,
    "table": table.Panel,
    "barchart": barchart.Panel,
    "bargauge": bargauge.Panel,
}
ORDERS = {"none": VariableSort.DISABLED, "asc": VariableSort.ALPHABETICAL_ASC, "desc": VariableSort.ALPHABETICAL_DESC}


def _variable(variable: Variable, dashboard: Dashboard) -> Any:
    scope = "|".join(dashboard.benchmarks)
    source = f'fleetbench_run_info{{benchmark=~"{scope}"}}' if scope else "fleetbench_run_info"
    builder = (
        sdk.QueryVariable(variable.name)
        .label(variable.label)
        .datasource(DATASOURCE)
        .query(f"label_values({source}, {variable.label_name})")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
    )
    if variable.multi:
        builder = builder.multi(True).include_all(True).all_value(".*")
    else:
        builder = builder.multi(False).include_all(False)
    if variable.order != "none":
        builder = builder.sort(ORDERS[variable.order])
    return builder


def _thresholds(panel: Panel, builder: Any) -> Any:
    steps = [Threshold(value=value, color=color) for value, color in panel.thresholds]
    return builder.thresholds(sdk.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)).color_scheme(
        sdk.FieldColor().mode(FieldColorModeId.THRESHOLDS)
    )


def _panel(panel: Panel, panel_id: int, grid: GridPos) -> Any:
    builder = (
        PANEL_BUILDERS[panel.kind]()
        .id(panel_id)
        .title(panel.title)
        .description(panel.description)
        .datasource(DATASOURCE)
        .unit(panel.unit)
        .grid_pos(grid)
    )
    if panel.thresholds:
        builder = _thresholds(panel, builder)
    for index, query in enumerate(panel.queries):
        target = prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + index))
        if query.legend:
            target = target.legend_format(query.legend)
        target = target.instant() if query.instant else target.range()
        if query.instant and panel.kind == "table":
            target = target.format(PromQueryFormat.TABLE)
        builder = builder.with_target(target)
    return builder


def to_grafana(dashboard: Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana JSON: variables, then rows whose panels wrap at the grid's 24 columns."""
    builder = (
        sdk.Dashboard(dashboard.title)
        .uid(dashboard.uid)
        .description(dashboard.description)
        .tags(list(dashboard.tags))
        .editable()
        .refresh("30s")
        .time("now-6h", "now")
        .with_variable(sdk.DatasourceVariable("datasource").label("Data source").type("prometheus"))
    )
    for variable in dashboard.variables:
        builder = builder.with_variable(_variable(variable, dashboard))
    panel_id, y = 1, 0
    for row in dashboard.rows:
        builder = builder.with_row(sdk.Row(row.title).id(panel_id).grid_pos(GridPos(h=1, w=GRID_WIDTH, x=0, y=y)))
        panel_id, y, x, row_height = panel_id + 1, y + 1, 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:  # wrap to the next line of the row
                x, y, row_height = 0, y + row_height, 0
            builder = builder.with_panel(_panel(panel, panel_id, GridPos(h=panel.height, w=panel.width, x=x, y=y)))
            panel_id, x, row_height = panel_id + 1, x + panel.width, max(row_height, panel.height)
        y += row_height
    result: dict[str, Any] = json.loads(jsonio.dumps(builder.build(), cls=JSONEncoder))
    return result


def render_json(dashboard: Dashboard) -> str:
    """The dashboard's JSON file text (sorted keys, so regeneration diffs are stable)."""
    return jsonio.dumps(to_grafana(dashboard), indent=2, sort_keys=True) + "\n"


def write_all(dashboards: list[Dashboard], out_dir: Path) -> list[Path]:
    """Write `<uid>.json` for each dashboard into `out_dir`; return the paths written.

    Every file is rendered first, then each is replaced whole (written beside it, then renamed), so a
    failed write leaves the previous file as it was. `out_dir` must be a writable folder (a
    UserError otherwise, before anything is written).
    """
    ensure_writable_dir(out_dir, "dashboards folder", "--out DIR")
    texts = {out_dir / f"{dashboard.uid}.json": render_json(dashboard) for dashboard in dashboards}
    for path, text in texts.items():
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            partial.write_text(text, encoding="utf-8")
            partial.replace(path)
        except OSError as exc:
            raise UserError(f"writing {path} failed ({exc.strerror or exc}); it is unchanged") from None
        finally:
            partial.unlink(missing_ok=True)
    return list(texts)


def stale(dashboards: list[Dashboard], out_dir: Path) -> list[str]:
    """Dashboards whose committed JSON differs from a fresh generation (or is missing/extra).

    `out_dir` must be a folder whose files can be read (a UserError otherwise).
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} is a file, not a folder; accepted: the dashboards folder to check")
    try:
        return _stale(dashboards, out_dir)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(
            f"--out {out_dir}: cannot read the dashboards ({reason}); accepted: a readable folder"
        ) from None


def _stale(dashboards: list[Dashboard], out_dir: Path) -> list[str]:
    expected = {f"{d.uid}.json": render_json(d) for d in dashboards}
    present = {p.name for p in out_dir.glob("*.json")} if out_dir.is_dir() else set()
    for name in sorted(present & set(expected)):  # a FIFO would block the read: refused first
        readable_file(out_dir / name, "dashboard", "accepted: the JSON `fleetbench dashboards` writes")
    problems = [
        name
        for name, text in expected.items()
        if name not in present or (out_dir / name).read_text(encoding="utf-8") != text
    ]
    return problems + sorted(present - set(expected))
