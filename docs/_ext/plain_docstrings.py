"""Render the package's plain-text docstrings as text, not as reStructuredText markup.

The docstrings name fitted attributes the scikit-learn way (``components_``) and write norms as
``|x|_1``, often outside double backquotes. In reStructuredText a trailing underscore makes a
hyperlink reference and a bar a substitution, so those words would break the build. After
napoleon has turned each docstring into reStructuredText, this hook escapes them in running text,
leaving inline literals, roles, directives, doctests and literal blocks untouched.
"""

from __future__ import annotations

import re

# inline literals and roles (``x``, :func:`x`, `x`), kept as they are
_PROTECTED = re.compile(r"``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_{0,2}")
# a word ending in "_" (a reference in reST), and a bar (a substitution)
_REFERENCE = re.compile(r"(?<![\\\w])(\w*[A-Za-z0-9])_(?![\w`])")
_BAR = re.compile(r"(?<!\\)\|")


def _escape_text(text: str) -> str:
    text = _REFERENCE.sub(r"\1\\_", text)
    return _BAR.sub(r"\\|", text)


def escape_line(line: str) -> str:
    """``line`` with reference-making underscores and bars escaped outside literals and roles."""
    out, pos = [], 0
    for match in _PROTECTED.finditer(line):
        out.append(_escape_text(line[pos:match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(_escape_text(line[pos:]))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def escape_lines(lines: list[str]) -> list[str]:
    """Every line escaped except directives, doctests and the literal blocks after ``::``."""
    out, literal_from = [], None
    for line in lines:
        stripped = line.strip()
        if literal_from is not None:
            if stripped and _indent(line) <= literal_from:
                literal_from = None
            else:
                out.append(line)
                continue
        if stripped.startswith((">>>", "... ", "..", ":param", ":type", ":rtype")) and not stripped.startswith("...:"):
            kept = stripped.startswith((":param", ":type", ":rtype"))
            out.append(_field(line) if kept else line)
        else:
            out.append(escape_line(line))
        if stripped.endswith("::") and not stripped.startswith(".."):
            literal_from = _indent(line)
        elif stripped.startswith(".. code") or stripped == "::":
            literal_from = _indent(line)
    return out


def _field(line: str) -> str:
    """A ``:param name: text`` line: the field name as it is, its text escaped."""
    match = re.match(r"(\s*:[^:]+:)(.*)", line)
    if not match:
        return line
    return match.group(1) + escape_line(match.group(2))


def process(app, what, name, obj, options, lines):
    lines[:] = escape_lines(lines)


def setup(app):
    # after napoleon (priority 500), which reads the numpydoc sections first
    app.connect("autodoc-process-docstring", process, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
