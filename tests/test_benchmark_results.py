"""Every committed benchmark result names a command its script still accepts.

benchmarks/results/*.txt hold the output of a command written above it (``# command: .venv/bin/python -m
benchmarks.<name> <flags>``, ``# python -m benchmarks.<name> <flags>``, or the ``# bench_x <flags>; date``
line a script echoes). A flag the script no longer has, or a value its parser refuses, makes the numbers
under it impossible to reproduce. Each command's arguments go through the very parser the script would
build for them (its ``main`` is run up to its ``parse_args`` call, in one child process, then stopped), so
flags, choices and value types are checked and nothing is run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.txt"))
# "... -m benchmarks.bench_x --a 1 --b  (comment" anywhere in a line
RUN = re.compile(r"-m\s+benchmarks\.(?P<module>\w+)(?P<rest>.*)")
# "# bench_x --a 1 --b; 2026-12-03 ..." or "# bench_x --a 1: x86_64, ...", as the scripts echo their arguments
ECHO = re.compile(r"^#\s*(?P<module>bench_\w+|slurm_requests)(?P<rest>\s+--.*)")
# an argument: quoted (kept whole, quotes dropped) or a run of other characters
TOKEN = re.compile(r"""'([^']*)'|"([^"]*)"|([^\s'"]+)""")

# Run in a child (the scripts set threads and environment variables at import): reads [[module, args], ...]
# as JSON on stdin, writes one verdict per command (null = accepted, else the parser's complaint).
CHECKER = r"""
import argparse, contextlib, io, json, runpy, sys

class Captured(BaseException):  # not caught by a script's "except Exception"
    pass

def capture(self, args=None, namespace=None):
    raise Captured(self)

original = argparse.ArgumentParser.parse_known_args
verdicts = []
for module, args in json.load(sys.stdin):
    argparse.ArgumentParser.parse_known_args = capture
    sys.argv = [f"benchmarks/{module}.py", *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_module(f"benchmarks.{module}", run_name="__main__")
        verdicts.append("the script ran to its end without parsing arguments")
        continue
    except Captured as c:
        parser = c.args[0]
    finally:
        argparse.ArgumentParser.parse_known_args = original
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _, extra = parser.parse_known_args(args)
        verdicts.append(f"unrecognized arguments: {' '.join(extra)}" if extra else None)
    except SystemExit:
        verdicts.append(err.getvalue().strip().splitlines()[-1])
json.dump(verdicts, sys.stdout)
"""


def parse_command(line: str) -> tuple[str, list[str]] | None:
    """(module, arguments) of a command written in a results line, or None if the line holds none.

    Square brackets around optional arguments are dropped (the arguments inside are checked)."""
    m = RUN.search(line) or ECHO.match(line)
    if m is None:
        return None
    return m.group("module"), arguments(m.group("rest"))


def arguments(rest: str) -> list[str]:
    """The arguments at the start of ``rest``: they end at a run of spaces, a parenthesis, a semicolon or a
    word ending in a colon (the comment a results line goes on with)."""
    out, end = [], 0
    for t in TOKEN.finditer(rest):
        if "  " in rest[end:t.start()]:
            break
        end = t.end()
        if t.group(3) is None:
            out.append(t.group(1) if t.group(1) is not None else t.group(2))
            continue
        word = t.group(3).replace("[", "").replace("]", "")
        if word.startswith("("):
            break
        stop = word.endswith(":") or ";" in word
        word = word.split(";")[0].removesuffix(":")
        if word:
            out.append(word)
        if stop:
            break
    return out


def expand_braces(args: list[str]) -> list[list[str]]:
    """Every command a template stands for: an argument ``{a,b,c}`` gives one command per value."""
    out = [[]]
    for a in args:
        values = a[1:-1].split(",") if re.fullmatch(r"\{[^{}]*,[^{}]*\}", a) else [a]
        out = [o + [v] for o in out for v in values]
    return out


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with a line ending in a backslash joined to the next (its '#' dropped)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1].rstrip() + " " + lines[i].lstrip("# ")
        out.append((start, line))
        i += 1
    return out


def commands_in(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, module, arguments) of every command in the text of a results file."""
    found = []
    for i, line in logical_lines(text):
        cmd = parse_command(line)
        if cmd is not None:
            found += [(i, cmd[0], args) for args in expand_braces(cmd[1])]
    return found


def commands(path: Path) -> list[tuple[int, str, list[str]]]:
    return commands_in(path.read_text())


def takes_arguments(module: str) -> bool:
    return "ArgumentParser" in (REPO / "benchmarks" / f"{module}.py").read_text()


@lru_cache(maxsize=None)
def verdicts(batch: tuple[tuple[str, tuple[str, ...]], ...]) -> dict:
    """{(module, args): None if its parser accepts args, else why not}, all in one child process."""
    out = {}
    for module, args in batch:
        if not (REPO / "benchmarks" / f"{module}.py").is_file():
            out[module, args] = f"no script benchmarks/{module}.py"
        elif not takes_arguments(module) and args:
            out[module, args] = "the script takes no arguments"
        elif not takes_arguments(module):
            out[module, args] = None
    todo = [(m, a) for m, a in batch if (m, a) not in out]
    if todo:
        proc = subprocess.run([sys.executable, "-c", CHECKER], input=json.dumps([[m, list(a)] for m, a in todo]),
                              capture_output=True, text=True, cwd=REPO, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out.update(zip(todo, json.loads(proc.stdout)))
    return out


# made-up commands that the checker must refuse (and one it must accept), checked in the same child
BAD = (("bench_startup", ("--repeats", "3", "--no-such-flag")),
       ("bench_latent_real", ("--moves", "--moves-variants", "no-such-variant")),
       ("bench_startup", ("--repeats", "three")),
       ("bench_no_such_script", ("--quick",)),
       ("bench_quadro_shrinkage", ("--quick",)))
GOOD = (("bench_startup", ("--repeats", "3")),)


@lru_cache(maxsize=None)
def all_verdicts() -> dict:
    batch = {(m, tuple(a)) for path in RESULTS for _, m, a in commands(path)} | set(BAD) | set(GOOD)
    return verdicts(tuple(sorted(batch)))


def test_results_files_name_their_commands():
    assert len(RESULTS) > 20
    named = [p.name for p in RESULTS if commands(p)]
    assert "bench_latent_real.txt" in named and "bench_donors.txt" in named and len(named) > len(RESULTS) // 2


@pytest.mark.parametrize("path", [p for p in RESULTS if commands(p)], ids=lambda p: p.name)
def test_every_command_is_accepted_by_its_script(path):
    v = all_verdicts()
    bad = [f"{path.name}:{i}: benchmarks.{m} {' '.join(a)}: {v[m, tuple(a)]}"
           for i, m, a in commands(path) if v[m, tuple(a)] is not None]
    assert not bad, "results whose command the script no longer accepts (rerun, relabel or drop them):\n" \
        + "\n".join(bad)


# a results file named in prose: benchmarks/results/x.txt, or bench_x.txt / slurm_requests_x.txt on its own
CITED = re.compile(r"\b((?:bench|slurm_requests)[a-z0-9_]*\.txt)\b")
CITING = sorted({*(REPO / "docs").rglob("*.md"), REPO / "README.md", *(REPO / "benchmarks").glob("*.py"), *RESULTS})


def test_every_cited_results_file_exists():
    """Docs, benchmark scripts and results that name a results file name one the repository holds (a removed
    file leaves no citation behind)."""
    held = {p.name for p in RESULTS}
    missing = sorted({f"{p.relative_to(REPO)}: {name}" for p in CITING if p.is_file()
                      for name in CITED.findall(p.read_text()) if name not in held})
    assert not missing, "results files cited but not in benchmarks/results:\n" + "\n".join(missing)


def test_the_citation_pattern_finds_names():
    assert CITED.findall("see `benchmarks/results/bench_latent_defaults.txt` and slurm_requests_200k.txt") == [
        "bench_latent_defaults.txt", "slurm_requests_200k.txt"]
    assert CITED.findall("benchmarks/bench_latent_real.py writes no .txt") == []


@pytest.mark.parametrize("line, expected", [
    ("# command: .venv/bin/python -m benchmarks.bench_latent_real --moves --shipped-only  ('default' = the",
     ("bench_latent_real", ["--moves", "--shipped-only"])),
    ("# python -m benchmarks.bench_donors --timing (machine: AMD EPYC virtual machine, 2 cores; nice 10)",
     ("bench_donors", ["--timing"])),
    ("  OPENBLAS_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python -m benchmarks.bench_sparda_real --variants --reps 200",
     ("bench_sparda_real", ["--variants", "--reps", "200"])),
    ("# bench_donors --sparda-splits --sources NAT Tumor --max-splits 35; 2026-12-03 21:45, 2 cores, load 13.03",
     ("bench_donors", ["--sparda-splits", "--sources", "NAT", "Tumor", "--max-splits", "35"])),
    ("# bench_study --workflow 8000 --keep /tmp/bs: x86_64, 2 cores, load 10.7",
     ("bench_study", ["--workflow", "8000", "--keep", "/tmp/bs"])),
    ("# command: .venv/bin/python -m benchmarks.bench_cpca", ("bench_cpca", [])),
    ("""# command: .venv/bin/python -m benchmarks.bench_quadro_real --params '{"cv_rule": "1se"}' --only CD8: rows""",
     ("bench_quadro_real", ["--params", '{"cv_rule": "1se"}', "--only", "CD8"])),
    ("# command: table 4 of benchmarks/bench_cpca.py alone (bench_cpca.speed_rows(threads=None))", None),
    ("bench_latent_real: library defaults; load (0.26, 0.92, 1.83), 2 cores", None),
    ("# machine: AMD EPYC virtual machine, 2 cores, 32 MiB L3", None),
])
def test_command_lines_are_read(line, expected):
    assert parse_command(line) == expected


def test_templates_are_expanded():
    text = ("#    .venv/bin/python -m benchmarks.bench_quadro_subsample x.h5ad {None,10000} \\\n"
            "#        --save runs [--compare runs/None.npz]\nrows\n")
    assert logical_lines(text)[0][0] == 1 and logical_lines(text)[1] == (3, "rows")
    assert [a for _, _, a in commands_in(text)] == [
        ["x.h5ad", "None", "--save", "runs", "--compare", "runs/None.npz"],
        ["x.h5ad", "10000", "--save", "runs", "--compare", "runs/None.npz"]]


def test_the_checker_refuses_what_a_script_does_not_accept():
    """Unknown flags, values outside a flag's choices or type, missing scripts and flags given to a script
    without a parser are all reported; a valid command is not."""
    v = all_verdicts()
    for cmd in BAD:
        assert v[cmd] is not None, cmd
    assert "--no-such-flag" in v[BAD[0]] and "no-such-variant" in v[BAD[1]]
    for cmd in GOOD:
        assert v[cmd] is None, (cmd, v[cmd])
