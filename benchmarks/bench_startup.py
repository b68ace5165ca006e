"""Fixed start-up of each workflow job: a fresh interpreter importing what the rule's script uses.

Run:  .venv/bin/python -m benchmarks.bench_startup [--repeats 5]

Every rule runs its script in a new Python process, so what the script imports is paid once per
job, per dataset. The goal is <= 3 s per rule. Printed: the median over ``--repeats``
fresh processes per rule, the bare interpreter for reference, and the machine's load average
(the numbers scale with it on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

# rule -> the import statements its script runs before any work (scripts/<rule>.py)
RULES = {
    "python (no import)": "pass",
    "preprocess": ("import scontrast._workflow; from scontrast import io, pl; "
                   "from scontrast.preprocess import preprocess; pl.preprocess; import scanpy"),  # scanpy loads when it runs
    "sparda": "import scontrast._workflow; from scontrast import io, tl; tl.sparda",
    "cpca": "import scontrast._workflow; from scontrast import io, tl; tl.cpca",
    "pcpca": "import scontrast._workflow; from scontrast import io, tl; tl.pcpca",
    "quadro": "import scontrast._workflow; from scontrast import io, tl; tl.quadro",
    "latent_features": "import scontrast._workflow; from scontrast import io, tl; tl.latent_features",
    "fangs": "import scontrast._workflow; from scontrast import io, tl; tl.fangs",
    # PyDESeq2 loads when the rule runs, not at import
    "pseudobulk": "import scontrast._workflow; from scontrast import io, tl; tl.pseudobulk",
    "<method>_figure": "import scontrast._workflow; from scontrast import io, pl; pl.sparda",
    "collect": "import scontrast._workflow; from scontrast.merge_files import merge_files",
    "summary": (
        "import scontrast._workflow; from scontrast import io; from scontrast.merge_files import read_annotations; "
        "from scontrast.summary import summarise"
    ),
    "genes": "import scontrast._workflow; from scontrast import io; from scontrast.tables import gene_table",
    "overview": "import scontrast._workflow; from scontrast import io; from scontrast.summary import overview_html",
    "design_check": "import scontrast._workflow; from scontrast import io; from scontrast.study._workflow import study_design",
    "study": "import scontrast._workflow; from scontrast import io; from scontrast.study import run_study",
}


def time_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.repeats} fresh processes per rule (median)")
    for rule, code in RULES.items():
        time_once(code)  # warm the file cache (and numba's on-disk cache)
        times = [time_once(code) for _ in range(args.repeats)]
        flag = "" if rule.startswith("python") or statistics.median(times) <= 3.0 else "  > 3 s goal"
        print(f"{rule:20s} {statistics.median(times):6.2f} s  (min {min(times):.2f}){flag}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
