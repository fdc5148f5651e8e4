"""Delete a directory tree a Python-tool call wrote: iteratively, bounded in time, never outside it.

`shutil.rmtree` recurses once per level, so ~1,000 nested directories raise RecursionError (and
it keeps one descriptor per level). This walk holds one descriptor and a stack of names, climbs
back with `..` and checks each parent's identity, so a directory moved during the walk can never
lead it out of the tree. Loaded by path by `_python_worker.py` and imported by
`sandbox.python_tool`; imports nothing from the project.
"""

import os
import stat
import time

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _first_subdir(fd: int) -> str | None:
    """Unlink every non-directory in `fd`; return one subdirectory's name, or None if none is left."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=fd)
    return None


def remove_tree(path: str, deadline: float) -> bool:
    """Remove `path` and everything under it by `deadline` (time.monotonic); True when it is gone.

    False (the tree is partly left) when the deadline passes or something cannot be removed or
    moved under the walk; the caller then discards whatever held the tree instead of reusing it.
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    names: list[str] = []  # the path from `path` down to `fd`
    idents = [_ident(fd)]  # (st_dev, st_ino) of each directory on that path
    try:
        while True:
            if time.monotonic() > deadline:
                return False
            sub = _first_subdir(fd)
            if sub is not None:
                child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(sub)
                idents.append(_ident(fd))
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            idents.pop()
            if _ident(fd) != idents[-1]:
                return False  # the tree was changed under the walk: stop rather than leave it
            os.rmdir(names.pop(), dir_fd=fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(fd)
    return st.st_dev, st.st_ino
