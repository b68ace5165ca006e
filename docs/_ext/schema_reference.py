"""Sphinx directive ``schema-reference``: one workflow schema rendered as a list of its keys.

``.. schema-reference:: config.schema.yaml`` (or ``{schema-reference} config.schema.yaml`` in MyST) reads
``workflow/schemas/<file>`` when the docs build and writes one entry per key: its dotted path, type,
default, bounds and description. Nested objects (``datasets.<name>.*``, ``plot``) are walked; a
``$ref`` to another schema file is named with a link to that file's section, not repeated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import Directive, directives

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "workflow" / "schemas"
_CODE = re.compile(r"`([^`]+)`|(\b[a-z_]+\[['\"][^\]]+['\"]\](?:\[['\"][^\]]+['\"]\])*)")


def load(name: str) -> dict:
    """The schema file ``workflow/schemas/<name>`` as a dict."""
    with open(SCHEMA_DIR / name, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def type_text(spec: dict) -> str:
    """A schema node's type in words: ``integer``, ``number or null``, ``one of: a, b``."""
    if "$ref" in spec:
        return f"block ({spec['$ref']})"
    if "enum" in spec:
        return "one of: " + ", ".join(json.dumps(v) for v in spec["enum"])
    if "anyOf" in spec:
        return " or ".join(type_text(s) for s in spec["anyOf"])
    kind = spec.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds and isinstance(spec.get("items"), dict):
        kinds = [f"list of {type_text(spec['items'])}" if k == "array" else k for k in kinds]
    return " or ".join(kinds)


def bounds_text(spec: dict) -> str:
    """The range a number must lie in (``>= 0``, ``< 1``...), or ``''``."""
    parts = []
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in spec:
            parts.append(f"{sign} {spec[key]}")
    return ", ".join(parts)


def rich_text(text: str) -> list[nodes.Node]:
    """Plain text with `quoted` names and ``slot['key']`` paths set as code."""
    out, pos = [], 0
    for match in _CODE.finditer(text):
        if match.start() > pos:
            out.append(nodes.Text(text[pos:match.start()]))
        out.append(nodes.literal(text=match.group(1) or match.group(2)))
        pos = match.end()
    out.append(nodes.Text(text[pos:]))
    return out


def entries(spec: dict, prefix: str) -> list[tuple[str, dict]]:
    """Every key below ``spec`` as (dotted path, schema node), depth first, in file order."""
    out = []
    for key, sub in (spec.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.append((path, sub))
        out.extend(entries(sub, path))
    extra = spec.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        path = f"{prefix}.<name>" if prefix else "<name>"
        out.append((path, extra))  # one entry per name the user chooses (a dataset), then its keys
        out.extend(entries(extra, path))
    return out


def entry_node(path: str, spec: dict) -> nodes.definition_list_item:
    """One key as a definition-list item: the path and type as the term, the rest as the definition."""
    term = nodes.term()
    term += nodes.literal(text=path)
    term += nodes.Text(f"  ({type_text(spec)})")
    body = nodes.definition()
    para = nodes.paragraph()
    if "default" in spec:
        para += nodes.Text("Default ")
        para += nodes.literal(text=json.dumps(spec["default"]))
        para += nodes.Text(". ")
    bounds = bounds_text(spec)
    if bounds:
        para += nodes.Text(f"Range {bounds}. ")
    if "minItems" in spec:
        para += nodes.Text(f"At least {spec['minItems']} item(s). ")
    para.extend(rich_text(" ".join(str(spec.get("description", "")).split())))
    body += para
    item = nodes.definition_list_item()
    item += term
    item += body
    return item


class SchemaReference(Directive):
    """``.. schema-reference:: <file>``: the keys of one schema file, with an optional ``:prefix:``."""

    required_arguments = 1
    option_spec = {"prefix": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        self.state.document.settings.record_dependencies.add(str(SCHEMA_DIR / name))
        spec = load(name)
        out = []
        if spec.get("description"):
            para = nodes.paragraph()
            para.extend(rich_text(" ".join(str(spec["description"]).split())))
            out.append(para)
        items = entries(spec, self.options.get("prefix", ""))
        if items:
            dl = nodes.definition_list()
            for path, sub in items:
                dl += entry_node(path, sub)
            out.append(dl)
        return out


def setup(app):
    app.add_directive("schema-reference", SchemaReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
