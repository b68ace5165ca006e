"""The check every input path gets before anything reads it (a notebook's read or the workflow's config).

It imports nothing of scontrast, so :mod:`scontrast.io`, :mod:`scontrast.merge_files` and the
workflow (:mod:`scontrast._workflow`, ``workflow/rules/common.smk``) all import it without a cycle.
"""

from __future__ import annotations

import os

__all__ = ["input_file_problem"]

_FILE_TYPES = (  # (stat test, what to call it), for the types of file that are not regular
    ("S_ISDIR", "a directory"), ("S_ISFIFO", "a FIFO"), ("S_ISCHR", "a character device"),
    ("S_ISBLK", "a block device"), ("S_ISSOCK", "a socket"),
)


def input_file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be an input file, or None for an existing, regular, readable file.

    The reason completes ``"'<path>' "``: ``"does not exist (no such file)"``, ``"is not a
    regular file (a FIFO)"``... Looks with ``stat`` and opens only a regular file, without
    blocking: reading a FIFO (or sizing it with h5py) waits forever for a writer, and a device
    such as ``/dev/zero`` never ends. A symbolic link is followed (one to a regular file is fine).
    """
    import errno
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a symbolic link to '{os.readlink(path)}', which does not exist"
        return "does not exist (no such file)"
    except PermissionError:
        return "cannot be reached (permission denied on a folder of the path)"
    except OSError as exc:  # not a directory on the way, a link loop, a name too long
        return f"cannot be reached ({os.strerror(exc.errno).lower() if exc.errno else exc})"
    except ValueError as exc:  # an embedded NUL byte
        return f"is not a valid path ({exc})"
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_TYPES if getattr(stat, test)(mode)), "not a file")
        return f"is not a regular file ({kind})"
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        if exc.errno == errno.EACCES:
            return "is not readable (permission denied)"
        return f"cannot be opened ({os.strerror(exc.errno).lower() if exc.errno else exc})"
    return None
