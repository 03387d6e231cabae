"""Pictures of a trace: Graphviz DOT source, or one self-contained HTML file (inline SVG, no scripts).

A node per input and per bound symbol (``del`` statements are left out), an edge per proxy read,
labelled with the proxy's name. Nodes are coloured by the executor that runs them; a fusion region
(a bound symbol of a ``FusionExecutor``, such as ``nvFusion0``) is drawn as a box around the
operations fused into it in DOT, and as one node listing them in HTML.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field

from thunder.core.executor import FusionExecutor
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import DEL, RETURN, BoundSymbol
from thunder.core.trace import Trace

__all__ = ["trace_to_dot", "trace_to_html"]

_PALETTE = ("#cfe2ff", "#d1e7dd", "#fff3cd", "#f8d7da", "#e2d9f3", "#d3f4f4", "#ffe5d0")
_INPUT_COLOR, _OUTPUT_COLOR, _PLAIN_COLOR = "#eeeeee", "#eeeeee", "#ffffff"


@dataclass
class _Node:
    key: str
    label: str  # first line: what it computes
    detail: str  # second line: executor, shape
    color: str
    reads: list[str] = field(default_factory=list)  # proxy names
    writes: list[str] = field(default_factory=list)
    fused: list[str] = field(default_factory=list)  # the operations of a fusion region


def _is_fusion(bound_symbol: BoundSymbol) -> bool:
    return isinstance(bound_symbol.symbol.executor, FusionExecutor)


def _executor_name(bound_symbol: BoundSymbol) -> str:
    executor = bound_symbol.symbol.executor
    if executor is not None:
        return executor.name
    return bound_symbol.symbol.module or ""


def _metadata(proxy: Proxy) -> str:
    """``cpu f32[2, 3]`` for a tensor (its type comment without the quotes), else nothing."""
    return proxy.type_comment().strip('"') if isinstance(proxy, TensorProxy) else ""


def _call_text(bound_symbol: BoundSymbol) -> str:
    outputs = ", ".join(p.name for p in bound_symbol.proxy_outputs())
    call = f"{bound_symbol.symbol.call_name}({', '.join(p.name for p in bound_symbol.proxy_args())})"
    return f"{outputs} = {call}" if outputs else call


class _Colors:
    def __init__(self) -> None:
        self.by_executor: dict[str, str] = {}

    def __call__(self, executor: str) -> str:
        if not executor:
            return _PLAIN_COLOR
        if executor not in self.by_executor:
            self.by_executor[executor] = _PALETTE[len(self.by_executor) % len(_PALETTE)]
        return self.by_executor[executor]


def _nodes(trace: Trace, colors: _Colors) -> Iterator[_Node]:
    for proxy in trace.args:
        if isinstance(proxy, Proxy):
            yield _Node(f"in_{proxy.name}", proxy.name, _metadata(proxy), _INPUT_COLOR, writes=[proxy.name])
    for index, bound_symbol in enumerate(trace.bound_symbols):
        if bound_symbol.symbol is DEL:
            continue
        reads = [p.name for p in bound_symbol.proxy_args()]
        if bound_symbol.symbol is RETURN:
            yield _Node("return", "return", ", ".join(reads), _OUTPUT_COLOR, reads=reads)
            continue
        executor = _executor_name(bound_symbol)
        outputs = bound_symbol.proxy_outputs()
        shape = _metadata(outputs[0]) if outputs else ""
        yield _Node(
            f"b{index}",
            _call_text(bound_symbol),
            " ".join(part for part in (f"[{executor}]" if executor else "", shape) if part),
            colors(executor),
            reads=reads,
            writes=[p.name for p in outputs],
            fused=[_call_text(sub) for sub in bound_symbol.subsymbols] if _is_fusion(bound_symbol) else [],
        )


def _edges(nodes: list[_Node]) -> Iterator[tuple[str, str, str]]:
    producer: dict[str, str] = {}
    for node in nodes:
        for name in node.reads:
            if name in producer:
                yield producer[name], node.key, name
        for name in node.writes:
            producer[name] = node.key


def _dot_string(text: str) -> str:
    """A quoted DOT string; a newline becomes DOT's line break ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def trace_to_dot(trace: Trace) -> str:
    """Graphviz DOT source of ``trace`` (render it with ``dot -Tsvg trace.dot -o trace.svg``).

    Args:
        trace: any trace, e.g. ``thunder.last_traces(jitted)[-1]``.

    Returns:
        A ``digraph`` whose nodes are the trace's inputs and operations and whose edges are
        labelled with the proxies passed between them.

    Example::

        from thunder.examine import trace_to_dot
        Path("forward.dot").write_text(trace_to_dot(thunder.last_traces(jitted)[-1]))
    """
    colors = _Colors()
    nodes = list(_nodes(trace, colors))
    lines = [
        f"digraph {_dot_string(trace.name)} {{",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=9];',
    ]
    for node in nodes:
        label = _dot_string(f"{node.label}\n{node.detail}" if node.detail else node.label)
        shape = ", shape=ellipse" if node.key.startswith("in_") or node.key == "return" else ""
        attributes = f"label={label}, fillcolor={_dot_string(node.color)}{shape}"
        if node.fused:
            lines.append(f"  subgraph cluster_{node.key} {{")
            lines.append(
                f"    label={_dot_string(node.label)}; style=filled; fillcolor={_dot_string(node.color)};"
            )
            lines.append(f"    {node.key} [{attributes}];")
            for position, operation in enumerate(node.fused):
                lines.append(
                    f'    {node.key}_{position} [label={_dot_string(operation)}, fillcolor="#ffffff"];'
                )
            lines.append("  }")
        else:
            lines.append(f"  {node.key} [{attributes}];")
    for source, target, name in _edges(nodes):
        lines.append(f"  {source} -> {target} [label={_dot_string(name)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# HTML: nodes in layers (a node sits one layer below the deepest node it reads from)
_BOX_WIDTH, _BOX_HEIGHT, _GAP_X, _GAP_Y, _CHARS = 230, 40, 30, 46, 34


def _layers(nodes: list[_Node], edges: list[tuple[str, str, str]]) -> dict[str, tuple[int, int]]:
    depth: dict[str, int] = {}
    sources: dict[str, list[str]] = {}
    for source, target, _ in edges:
        sources.setdefault(target, []).append(source)
    positions: dict[str, tuple[int, int]] = {}
    counts: dict[int, int] = {}
    for node in nodes:  # trace order is topological
        layer = 1 + max((depth[s] for s in sources.get(node.key, ())), default=-1)
        depth[node.key] = layer
        positions[node.key] = (counts.get(layer, 0), layer)
        counts[layer] = counts.get(layer, 0) + 1
    return positions


def _clip(text: str) -> str:
    return text if len(text) <= _CHARS else text[: _CHARS - 1] + "…"


def _svg(nodes: list[_Node], edges: list[tuple[str, str, str]]) -> str:
    positions = _layers(nodes, edges)
    xy = {
        key: (10 + column * (_BOX_WIDTH + _GAP_X), 10 + row * (_BOX_HEIGHT + _GAP_Y))
        for key, (column, row) in positions.items()
    }
    width = max((x for x, _ in xy.values()), default=0) + _BOX_WIDTH + 20
    height = max((y for _, y in xy.values()), default=0) + _BOX_HEIGHT + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">'
    ]
    parts.append(
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#666"/></marker></defs>'
    )
    for source, target, name in edges:
        (x1, y1), (x2, y2) = xy[source], xy[target]
        parts.append(
            f'<line x1="{x1 + _BOX_WIDTH / 2}" y1="{y1 + _BOX_HEIGHT}" x2="{x2 + _BOX_WIDTH / 2}" y2="{y2}" '
            f'stroke="#666" marker-end="url(#arrow)"><title>{html.escape(name)}</title></line>'
        )
    for node in nodes:
        x, y = xy[node.key]
        tooltip = "\n".join([node.label, node.detail, *node.fused])
        border = ' stroke-width="2.5"' if node.fused else ""
        parts.append(
            f'<g class="node" id="{node.key}"><title>{html.escape(tooltip)}</title>'
            f'<rect x="{x}" y="{y}" width="{_BOX_WIDTH}" height="{_BOX_HEIGHT}" rx="6" fill="{node.color}" stroke="#444"{border}/>'
            f'<text x="{x + 6}" y="{y + 16}">{html.escape(_clip(node.label))}</text>'
            f'<text x="{x + 6}" y="{y + 32}" fill="#555">{html.escape(_clip(node.detail))}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def trace_to_html(trace: Trace, title: str | None = None) -> str:
    """One self-contained HTML page showing ``trace`` as a graph, with its fusion regions and source.

    Args:
        trace: any trace, e.g. ``thunder.last_traces(jitted)[-1]``.
        title: the page's title; the trace's name and header by default.

    Returns:
        The page, with the graph as inline SVG (hover over a node for its full text), a legend of
        executors, the operations of each fusion region and the trace as Python. It loads nothing.

    Example::

        from thunder.examine import trace_to_html
        Path("forward.html").write_text(trace_to_html(thunder.last_traces(jitted)[-1]))
    """
    colors = _Colors()
    nodes = list(_nodes(trace, colors))
    edges = list(_edges(nodes))
    heading = title or f"{trace.name}: {trace.header.splitlines()[0] if trace.header else 'trace'}"
    legend = "".join(
        f'<span style="background:{color};padding:2px 8px;margin-right:6px;border:1px solid #999">{html.escape(name)}</span>'
        for name, color in colors.by_executor.items()
    )
    regions = "".join(
        f"<h3>{html.escape(node.label)}</h3><pre>{html.escape(chr(10).join(node.fused))}</pre>"
        for node in nodes
        if node.fused
    )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(heading)}</title>"
        "<style>body{font-family:sans-serif;margin:1em} pre{background:#f6f6f6;padding:8px;overflow:auto}</style>"
        f"</head><body>\n<h1>{html.escape(heading)}</h1>\n<p>Executors: {legend or 'none'}</p>\n"
        f"{_svg(nodes, edges)}\n"
        f"{'<h2>Fusion regions</h2>' + regions if regions else ''}\n"
        f"<h2>Source</h2><pre>{html.escape(str(trace))}</pre>\n</body></html>\n"
    )
