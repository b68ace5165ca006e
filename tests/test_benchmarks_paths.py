"""The benchmarks read only data the repository ships (``data/``, ``benchmarks/data/``) or a package provides.

A path outside the repository (a machine's shared folder, a home directory) would make a committed
result impossible for a user to reproduce with its command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "benchmarks").glob("*.py"))
# an absolute path into a machine's folders, or a relative one that climbs out of the repository
OUTSIDE = re.compile(r"""(?:["'`(\s]|^)(/(?:work|home|root|mnt|scratch|data|shared|srv|opt|Users)/|\.\./)""")
# a file of the repository's data folders that a benchmark names: as a Path or as text
SHIPPED = (re.compile(r'(?:ROOT|REPO)\s*/\s*"(data)"\s*/\s*"([^"]+)"'),
           re.compile(r'(?:ROOT|REPO)\s*/\s*"(benchmarks)"\s*/\s*"data"\s*/\s*"([^"]+)"'),
           re.compile(r'(?<![\w/.])((?:benchmarks/)?data/[\w.-]+\.(?:h5ad|npz))'))


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) > 10 and any(p.name == "bench_scale.py" for p in SCRIPTS)


# strict: the mark goes as soon as the file reads only shipped data
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_benchmark_reads_a_path_outside_the_repository(script):
    hits = [f"{script.name}:{i}: {line.strip()}" for i, line in enumerate(script.read_text().splitlines(), 1)
            if OUTSIDE.search(line)]
    assert not hits, "paths outside the repository (ship the data under data/ or benchmarks/data/):\n" + "\n".join(hits)


def test_the_pattern_catches_outside_paths():
    """The check above would see the paths it exists to refuse (and not the repository's own)."""
    for line in ('PBMC3K = Path("/work/shared/data/pbmc3k_raw.h5ad")', "raw = ad.read_h5ad('../shared/x.h5ad')",
                 "``/home/me/cells.h5ad``"):
        assert OUTSIDE.search(line), line
    for line in ('PBMC3K = ROOT / "data" / "pbmc3k_celltypes.h5ad"', "see data/README.md", 'Path("/tmp/scale")'):
        assert not OUTSIDE.search(line), line


def test_every_data_file_a_benchmark_names_is_shipped():
    named = set()
    for script in SCRIPTS:
        text = script.read_text()
        named |= {f"data/{m.group(2)}" for m in SHIPPED[0].finditer(text)}
        named |= {f"benchmarks/data/{m.group(2)}" for m in SHIPPED[1].finditer(text)}
        named |= {m.group(1) for m in SHIPPED[2].finditer(text)}
    assert "data/pbmc3k_celltypes.h5ad" in named and "benchmarks/data/pbmc3k_gene_parameters.npz" in named
    missing = sorted(p for p in named if not (REPO / p).is_file())
    assert not missing, f"benchmarks name data files the repository does not hold: {missing}"
