"""Files the commands write (-o, --qconfig-out, --junit): checked before slow work, OS errors
turned into messages a person can act on, and a record of which ones a run actually replaced
(so an interrupt can say truthfully what exists)."""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from .errors import UserInputError

_FIXES = {
    errno.ENOSPC: "free space on that disk, or write somewhere else",
    errno.EDQUOT: "free space within your disk quota, or write somewhere else",
    errno.EACCES: "choose a folder you can write to",
    errno.EPERM: "choose a folder you can write to",
    errno.EROFS: "that file system is read-only: choose a folder on a writable one",
    errno.ENOTDIR: "a part of the path is a file, not a folder: fix the path",
    errno.EISDIR: "the path is a folder: pass a file path inside it",
    errno.ENAMETOOLONG: "use a shorter file name",
}


def _problem(flag: str, path: Path, e: OSError) -> UserInputError:
    reason = e.strerror or type(e).__name__
    fix = _FIXES.get(e.errno, "choose a path in a folder you can create files in")
    return UserInputError(f"cannot write {flag} {path}: {reason}", f"{fix} (pass another {flag})")


@contextmanager
def write_errors(path: Path, flag: str) -> Iterator[None]:
    """OSError while writing `path` (given as `flag`) -> UserInputError naming the cause and the fix."""
    try:
        yield
    except OSError as e:
        raise _problem(flag, Path(path), e) from None


def check_writable(path: Path, flag: str) -> None:
    """Fail now, not after a long conversion, if `path` cannot be written: it must be (or become) a
    regular file in a folder where a new file can be created (the writers make a temp file there and
    rename it over `path`). Creates missing parent folders, as the writers would."""
    path = Path(path)
    with write_errors(path, flag):  # a stat can fail too (a folder without search permission)
        if path.is_dir():
            raise UserInputError(f"{flag} {path} is a folder, not a file path", f"pass a file path, e.g. {flag} {path / 'out'}")
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            # renaming over a device or FIFO would replace it (as root even /dev/null)
            raise UserInputError(f"{flag} {path} exists and is not a regular file", "pass a path for a new or ordinary file")
        for parent in path.parents:  # the nearest existing ancestor must be a folder
            if parent.exists():
                if not parent.is_dir():
                    raise UserInputError(f"cannot write {flag} {path}: {parent} is a file, not a folder",
                                         f"pass a path whose folders are folders (pass another {flag})")
                break
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)


@contextmanager
def scratch_folder(target: Path, flag: str) -> Iterator[Path]:
    """A new private folder `.NAME.RANDOM.partial` next to `target` (same file system, so a file made
    there can be renamed onto `target`) for temp files, removed with whatever is in it however the
    block ends: an error, Ctrl-C, or SIGTERM once the CLI has made it an exception. Its path is set
    before the folder exists, so an interrupt cannot leave an unnamed one behind."""
    target = Path(target)
    folder = None
    try:
        with write_errors(target, flag):
            target.parent.mkdir(parents=True, exist_ok=True)
            folder = target.parent / f".{target.name}.{secrets.token_hex(6)}.partial"
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:  # not ours: never remove it
                folder = None
                raise
        yield folder
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def identity(path: Path) -> Optional[tuple[int, int, int, int]]:
    """What is at `path` now (device, inode, mtime, size), or None: a file replaced by an atomic
    rename gets a new inode."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


class WriteLedger:
    """The files a command may write, with what was at each path when it started."""

    def __init__(self) -> None:
        self.before: dict[Path, Optional[tuple[int, int, int, int]]] = {}

    def expect(self, path: Path) -> None:
        path = Path(path)
        if path not in self.before:
            self.before[path] = identity(path)

    def written(self) -> list[Path]:
        """Paths whose file was created or replaced since `expect`."""
        return [p for p, was in self.before.items() if (now := identity(p)) is not None and now != was]
