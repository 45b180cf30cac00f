"""Paths and file systems: where a path really is, and the two file systems the job
writes on.

A path (an ``--input``, an output, a staging or checkpoint directory) is resolved to one
canonical :class:`Location` (relative paths, ``..`` and symbolic links for local paths;
scheme, authority and normalised path for URIs such as ``hdfs://``, ``s3a://`` or
``dbfs:/``), and :func:`check_overlaps` refuses an output that is, contains or lies inside
an input or another output.

:class:`LocalFS` (:mod:`os`, on the driver) and :class:`HadoopFS` (the Hadoop file system
of a classic Spark session) answer the same questions and make the same moves: what is
at a path, list, read a small file, write text, make directories, rename, delete, and
*claim* a staging directory by creating and locking it (the lock dies with the process,
so a run killed with ``kill -9`` does not block the next one). Nothing is followed or
removed on trust: a staging directory is opened without following a symbolic link, and
one a killed run left is emptied only if it holds the :data:`STAGING_MARKER` the job
writes first and nothing but :data:`STAGING_ENTRIES`. What the job writes where is
:mod:`vmi_spark.outputs`.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import json
import os
import posixpath
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import InputError, one_line

STAGING_PREFIX = ".vmi-tmp-"
"""Name prefix of a staging directory (the claim on an output, next to it)."""

STAGING_MARKER = "_VMI_SPARK_STAGING"
"""File the job writes first into a local staging directory it claimed: the proof that a
staging directory left by a killed run is the job's own (with the dead lock)."""

STAGING_ENTRIES = frozenset({STAGING_MARKER, "new", "old"})
"""The only entries the job puts into a staging directory."""

#: the largest marker file read back (a --write-selected marker lists the files written)
MARKER_BYTES = 64 << 20


class NotOurs(OSError):
    """A path the job would use holds something it did not create (the reason is the text)."""

LOCAL_SCHEMES: tuple[str | None, ...] = (None, "file")
"""Schemes handled with :mod:`os` on the driver (a plain path has scheme None)."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(?=/)")
_GLOB = re.compile(r"[*?\[{]")


@dataclass(frozen=True)
class Location:
    """One path the job reads or writes, in canonical form.

    Attributes
    ----------
    flag : str
        The command-line flag that named it (used in messages).
    given : str
        The path as the user gave it.
    root : str
        ``""`` for the local file system, else ``scheme://authority`` (lower case).
    parts : tuple of str
        The absolute path's segments; may hold Hadoop glob patterns when ``pattern``.
    pattern : bool
        Whether ``parts`` are glob patterns (an input path).
    """

    flag: str
    given: str
    root: str
    parts: tuple[str, ...]
    pattern: bool = False

    @property
    def text(self) -> str:
        """The canonical path as text."""
        return self.root + "/" + "/".join(self.parts)

    def describe(self) -> str:
        """``'given'``, followed by what it resolves to when that differs."""
        if self.text.rstrip("/") in (self.given.rstrip("/"), ""):
            return f"'{self.given}'"
        return f"'{self.given}' (resolves to '{self.text}')"


def scheme_of(path: str) -> str | None:
    """The URI scheme of ``path`` in lower case (``None`` for a plain local path)."""
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def local_path(path: str) -> str:
    """A ``file:`` URI or plain path as a local path (``file:///a``, ``file:/a`` -> ``/a``)."""
    if scheme_of(path) == "file":
        u = urlsplit(path)
        return u.path or "/"
    return path


def _real(path: str) -> str:
    """Absolute local path with ``..`` and symbolic links resolved (glob segments kept)."""
    parts = path.split("/")
    for i, seg in enumerate(parts):
        if _GLOB.search(seg):
            head = os.path.realpath("/".join(parts[:i]) or ("/" if path.startswith("/") else "."))
            return posixpath.join(head, *parts[i:])
    return os.path.realpath(path)


def resolve(path: str, flag: str, *, pattern: bool = False,
            local_only: bool = False) -> Location:
    """The canonical :class:`Location` of ``path``.

    Parameters
    ----------
    path : str
        A local path, a ``file:`` URI or (unless ``local_only``) any Hadoop URI.
    flag : str
        The flag that named it.
    pattern : bool
        Keep Hadoop glob segments (``*``, ``?``, ``[..]``, ``{a,b}``) as patterns.
    local_only : bool
        The path is opened by the driver with :mod:`os`: refuse other URIs.

    Returns
    -------
    Location
        ``dbfs:/Volumes/x`` and ``dbfs:/x`` become the local ``/Volumes/x`` and
        ``/dbfs/x`` (their FUSE mounts on Databricks); ``s3``/``s3n``/``s3a`` are one scheme.
    """
    given, scheme = path, scheme_of(path)
    if scheme == "dbfs" and not local_only:
        sub = urlsplit(path).path or "/"
        path, scheme = (sub if sub.startswith("/Volumes/") else "/dbfs" + sub), None
    if scheme in LOCAL_SCHEMES:
        real = _real(local_path(path)) if pattern else os.path.realpath(local_path(path))
        return Location(flag, given, "", tuple(p for p in real.split("/") if p), pattern)
    if local_only:
        raise InputError(f"{flag} is a directory on the driver's file system, got the URI "
                         f"'{path}' (on Databricks use a /dbfs/... or /Volumes/... path)")
    u = urlsplit(path)
    scheme = "s3" if scheme in ("s3a", "s3n") else scheme
    norm = posixpath.normpath("/" + u.path)
    return Location(flag, path, f"{scheme}://{u.netloc.lower()}",
                    tuple(p for p in norm.split("/") if p), pattern)


def _expand_braces(pattern: str, limit: int = 64) -> list[str]:
    """Hadoop ``{a,b}`` alternatives of one glob segment (innermost first, at most ``limit``)."""
    out: list[str] = []
    todo = [pattern]
    while todo and len(out) + len(todo) <= limit:
        p = todo.pop()
        m = re.search(r"\{([^{}]*)\}", p)
        if m is None:
            out.append(p)
        else:
            todo.extend(p[:m.start()] + alt + p[m.end():] for alt in m.group(1).split(","))
    return out + todo


def _segment_matches(name: str, pattern: str) -> bool:
    if not _GLOB.search(pattern):
        return name == pattern
    return any(fnmatch.fnmatchcase(name, p.replace("[^", "[!"))
               for p in _expand_braces(pattern))


def relation(out: Location, other: Location) -> str | None:
    """How ``out`` overlaps ``other``: ``"is"``, ``"contains"``, ``"lies inside"`` or None.

    Two locations overlap when they are on the same file system and the shorter path is a
    prefix of the longer one on segment boundaries (``other``'s segments may be globs).
    """
    if out.root != other.root:
        return None
    if not all(_segment_matches(a, b) if other.pattern else a == b
               for a, b in zip(out.parts, other.parts)):
        return None
    if len(out.parts) == len(other.parts):
        return "is"
    return "contains" if len(out.parts) < len(other.parts) else "lies inside"


def check_overlaps(outputs: Sequence[Location], inputs: Iterable[Location]) -> None:
    """Refuse an output that is, contains or lies inside an input or an earlier output.

    Raises
    ------
    InputError
        One line naming both flags.
    """
    inputs = list(inputs)
    for i, out in enumerate(outputs):
        for src in inputs:
            rel = relation(out, src)
            if rel:
                raise InputError(f"{out.flag} {out.describe()} {rel} the {src.flag} "
                                 f"{src.describe()}; the job never writes into, over or around "
                                 "what it reads: choose a directory outside the input")
        for prev in outputs[:i]:
            rel = relation(out, prev)
            if rel:
                raise InputError(f"{out.flag} {out.describe()} {rel} the {prev.flag} "
                                 f"{prev.describe()}; give each output its own directory")


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def lock_soon(fd: int, tries: int = 10) -> None:
    """``flock`` ``fd`` exclusively, retrying for ~0.2 s: :meth:`LocalFS.busy` of another run
    holds the lock for an instant. ``BlockingIOError`` if a run keeps holding it."""
    for i in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if i == tries - 1:
                raise
            time.sleep(0.02)


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)


def read_regular(path: str, limit: int, dir_fd: int | None = None) -> str | None:
    """The UTF-8 text of ``path`` if it is a regular file (a symbolic link is not
    followed, a FIFO not waited on) of at most ``limit`` bytes, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0),
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            return None
        return b"".join(chunks).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def create_at(dir_fd: int, name: str, text: str) -> None:
    """Create file ``name`` in the directory ``dir_fd`` (never over an existing entry or
    through a link; mode from the umask) holding ``text``."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666,
                 dir_fd=dir_fd)
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def marker_of(dir_fd: int, name: str, kind: str) -> dict | None:
    """The JSON object of marker file ``name`` in ``dir_fd`` if the job wrote it (a regular
    file whose ``writer`` is vmi_spark and ``kind`` is ``kind``), else None."""
    text = read_regular(name, 1 << 16, dir_fd=dir_fd)
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("writer") == "vmi_spark" and data.get("kind") == kind:
        return data
    return None


def _take_over(fd: int) -> None:
    """Empty the locked staging directory ``fd`` a killed run left, if it is the job's own.

    Raises
    ------
    NotOurs
        It holds something the job never puts there, or entries without the marker.
    """
    names = sorted(os.listdir(fd))
    if not names:
        return
    foreign = [n for n in names if n not in STAGING_ENTRIES]
    if foreign:
        raise NotOurs(f"holds '{foreign[0]}', which the job never puts there")
    if marker_of(fd, STAGING_MARKER, "staging") is None:
        raise NotOurs(f"has no valid {STAGING_MARKER} marker of this job")
    empty_at(fd)


def empty_at(fd: int) -> None:
    """Remove every entry of directory ``fd``, recursively, each relative to the descriptor
    of its own directory: no symbolic link is followed, whatever is renamed meanwhile."""
    for name in os.listdir(fd):
        try:
            if stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                try:
                    empty_at(sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass


class LocalFS:
    """Directory operations on the driver's file system (:mod:`os`)."""

    join = staticmethod(posixpath.join)
    parent = staticmethod(posixpath.dirname)

    def state(self, path: str) -> str:
        """``missing``, ``link`` (a symbolic link, never followed), ``empty`` (an empty
        directory), ``dir`` or ``file`` (anything else)."""
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):  # an ancestor is missing or a file
            return "missing"
        if stat.S_ISLNK(st.st_mode):
            return "link"
        if not stat.S_ISDIR(st.st_mode):
            return "file"
        return "dir" if os.listdir(path) else "empty"

    def regular(self, path: str) -> bool:
        """Whether ``path`` is a regular file (not a link to one)."""
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            return False

    def tree(self, path: str) -> list[tuple[str, str]]:
        """Every entry under directory ``path``: (relative path, ``dir``, ``file`` or
        ``link``), symbolic links not followed."""
        out: list[tuple[str, str]] = []
        for top, dirs, files in os.walk(path, followlinks=False):
            rel = os.path.relpath(top, path)
            for name in dirs + files:
                kind = self.state(os.path.join(top, name))
                out.append((name if rel == "." else f"{rel}/{name}",
                            "dir" if kind in ("dir", "empty") else kind))
        return sorted(out)

    def names(self, path: str) -> list[str]:
        """Entries of directory ``path``."""
        return sorted(os.listdir(path))

    def read_small(self, path: str, limit: int = 65536) -> str | None:
        """The text of a regular file (not a link) of at most ``limit`` bytes, else None."""
        return read_regular(path, limit)

    def write_text(self, path: str, text: str) -> None:
        """Create file ``path`` (mode from the umask) holding ``text``."""
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)

    def makedirs(self, path: str) -> list[str]:
        """Create ``path`` and missing ancestors (mode from the umask); returns those made."""
        made: list[str] = []
        todo = []
        while not os.path.lexists(path):
            todo.append(path)
            up = os.path.dirname(path)
            if up == path:
                break
            path = up
        for d in reversed(todo):
            try:
                os.mkdir(d)
            except FileExistsError:  # another run made it meanwhile: not ours to remove
                continue
            made.append(d)
        return made

    def claim(self, path: str) -> int:
        """Create directory ``path`` if missing and hold an exclusive lock on it.

        The lock (``flock``) dies with the process, so a directory left by a killed run
        is taken over by the next run, while one held by a live run raises
        ``FileExistsError``. ``path`` is opened without following a symbolic link, and a
        directory found there is emptied only if it is the job's own: empty, or holding
        the :data:`STAGING_MARKER` and nothing but :data:`STAGING_ENTRIES`; otherwise
        :class:`NotOurs`. The marker is then written. Returns the descriptor holding the
        lock.
        """
        for _ in range(5):
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except FileNotFoundError:  # released and removed meanwhile: try again
                continue
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotOurs("is a symbolic link" if self.state(path) == "link"
                                  else "is not a directory") from None
                raise
            try:
                lock_soon(fd)
            except BlockingIOError:
                os.close(fd)
                raise FileExistsError(path) from None
            try:
                if same_file(os.lstat(path), os.fstat(fd)):
                    _take_over(fd)
                    create_at(fd, STAGING_MARKER, json.dumps(
                        {"writer": "vmi_spark", "kind": "staging", "version": 1,
                         "pid": os.getpid()}) + "\n")
                    return fd
            except FileNotFoundError:  # released and removed meanwhile: try again
                pass
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise FileExistsError(path)

    def not_ours(self, path: str) -> str | None:
        """Why a staging directory at ``path`` could not be taken over (see :meth:`claim`),
        or None (missing, empty, or the job's own)."""
        state = self.state(path)
        if state == "link":
            return "is a symbolic link"
        if state == "file":
            return "is not a directory"
        if state != "dir":
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None  # gone meanwhile, or unreadable: claim() says so
        try:
            names = sorted(os.listdir(fd))
            foreign = [n for n in names if n not in STAGING_ENTRIES]
            if foreign:
                return f"holds '{foreign[0]}', which the job never puts there"
            if marker_of(fd, STAGING_MARKER, "staging") is None:
                return f"has no valid {STAGING_MARKER} marker of this job"
            return None
        finally:
            os.close(fd)

    def busy(self, path: str) -> bool:
        """Whether a live run holds directory ``path`` (see :meth:`claim`)."""
        if not os.path.lexists(path):
            return False
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return True  # a file, or unreadable: not ours to take
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock taken here

    def unclaim(self, path: str, handle: int) -> None:
        """Empty the claimed directory through its descriptor, remove it if ``path`` still
        names it, then drop the lock."""
        try:
            empty_at(handle)
            try:
                if same_file(os.lstat(path), os.fstat(handle)):
                    os.rmdir(path)
            except FileNotFoundError:
                pass
        finally:
            os.close(handle)

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to the free name ``dst``."""
        if os.path.lexists(dst):
            raise FileExistsError(f"'{dst}' exists")
        os.rename(src, dst)

    def delete(self, path: str) -> None:
        """Remove ``path`` (recursively, links not followed); a missing path is fine."""
        if self.state(path) in ("empty", "dir"):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)

    def remove_empty_dir(self, path: str) -> None:
        """Remove ``path`` if it is an empty directory."""
        try:
            os.rmdir(path)
        except OSError:
            pass


class HadoopFS:
    """The same operations on a Hadoop file system (HDFS, S3, ...) of a classic session.

    Creating the claim uses ``FileSystem.create(path, overwrite=false)``, exclusive on HDFS
    and on the local file system; object stores do not offer an exclusive create.
    """

    def __init__(self, jvm, conf) -> None:
        self._jvm, self._conf = jvm, conf

    def _fs(self, path: str):
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        return p, p.getFileSystem(self._conf)

    def join(self, parent: str, name: str) -> str:
        return str(self._jvm.org.apache.hadoop.fs.Path(parent, name))

    def parent(self, path: str) -> str:
        p = self._jvm.org.apache.hadoop.fs.Path(path).getParent()
        return str(p) if p is not None else path

    def qualify(self, path: str) -> str:
        """``path`` qualified with its file system's scheme and authority."""
        p, fs = self._fs(path)
        return str(fs.makeQualified(p))

    def _status(self, p, fs):
        """The entry's own status (a symbolic link's, where the file system has them), or
        None if there is none."""
        if not fs.exists(p):
            try:  # a dangling link: exists() follows it
                return fs.getFileLinkStatus(p)
            except Exception:  # noqa: BLE001 - no entry, or no links on this file system
                return None
        try:
            return fs.getFileLinkStatus(p)
        except Exception:  # noqa: BLE001 - a file system without links (object stores)
            return fs.getFileStatus(p)

    def state(self, path: str) -> str:
        p, fs = self._fs(path)
        st = self._status(p, fs)
        if st is None:
            return "missing"
        if st.isSymlink():
            return "link"
        if not st.isDirectory():
            return "file"
        return "dir" if len(fs.listStatus(p)) else "empty"

    def regular(self, path: str) -> bool:
        return self.state(path) == "file"

    def tree(self, path: str) -> list[tuple[str, str]]:
        """Every entry under directory ``path``: (relative path, ``dir``, ``file`` or
        ``link``), links not followed."""
        out: list[tuple[str, str]] = []
        todo = [("", path)]
        while todo:
            rel, cur = todo.pop()
            p, fs = self._fs(cur)
            for st in fs.listStatus(p):
                name = str(st.getPath().getName())
                sub = f"{rel}/{name}" if rel else name
                kind = ("link" if st.isSymlink() else "dir" if st.isDirectory() else "file")
                out.append((sub, kind))
                if kind == "dir":
                    todo.append((sub, self.join(cur, name)))
        return sorted(out)

    def names(self, path: str) -> list[str]:
        p, fs = self._fs(path)
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(p))

    def read_small(self, path: str, limit: int = 65536) -> str | None:
        p, fs = self._fs(path)
        try:
            if self.state(path) != "file" or fs.getFileStatus(p).getLen() > limit:
                return None
            stream = fs.open(p)
            try:
                return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
            finally:
                stream.close()
        except Exception:  # noqa: BLE001 - unreadable: not a marker
            return None

    def write_text(self, path: str, text: str) -> None:
        p, fs = self._fs(path)
        out = fs.create(p, False)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()

    def makedirs(self, path: str) -> list[str]:
        made = []
        todo, cur = [], path
        while self.state(cur) == "missing":
            todo.append(cur)
            up = self.parent(cur)
            if up == cur:
                break
            cur = up
        for d in reversed(todo):
            p, fs = self._fs(d)
            fs.mkdirs(p)
            made.append(d)
        return made

    def not_ours(self, path: str) -> str | None:
        """None: an existing staging directory is refused as busy (no lock to take over)."""
        return None

    def probe(self, directory: str) -> None:
        """Create and remove a uniquely named directory in ``directory``; OSError if the
        file system refuses."""
        p, fs = self._fs(self.join(directory, f"{STAGING_PREFIX}probe-{os.urandom(8).hex()}"))
        if not fs.mkdirs(p):
            raise OSError("cannot create a directory there")
        fs.delete(p, False)

    def busy(self, path: str) -> bool:
        """Whether ``path`` exists (no lock to tell a live run from a killed one)."""
        return self.state(path) != "missing"

    def unclaim(self, path: str, handle) -> None:
        self.delete(path)

    def claim(self, path: str) -> None:
        """Create directory ``path`` with a ``_CLAIM`` file; ``FileExistsError`` if present."""
        if self.state(path) != "missing":
            raise FileExistsError(path)
        p, fs = self._fs(self.join(path, "_CLAIM"))
        try:
            fs.create(p, False).close()
        except Exception as exc:
            if "FileAlreadyExists" in str(exc):
                raise FileExistsError(path) from None
            raise OSError(str(exc).strip().splitlines()[0] if str(exc).strip() else
                          "cannot create") from None

    def rename(self, src: str, dst: str) -> None:
        s, fs = self._fs(src)
        d, _ = self._fs(dst)
        if fs.exists(d) or not fs.rename(s, d):
            raise OSError(f"cannot move '{src}' to '{dst}'")

    def delete(self, path: str) -> None:
        p, fs = self._fs(path)
        fs.delete(p, True)

    def remove_empty_dir(self, path: str) -> None:
        if self.state(path) == "empty":
            p, fs = self._fs(path)
            fs.delete(p, False)


def writable(flag: str, path: str) -> None:
    """Refuse a local output whose directory (or nearest existing ancestor) is not writable.

    ``os.access`` answers first; as it says yes to root whatever the mode (and to some
    mounts that refuse writes), a uniquely named directory is then created and removed
    there: nothing is left behind.

    Raises
    ------
    InputError
        One line naming ``flag``.
    """
    where = os.path.abspath(path)
    while not os.path.lexists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    if not os.path.isdir(where):
        raise InputError(f"{flag} '{path}': '{where}' is not a directory")
    if not os.access(where, os.W_OK | os.X_OK):
        raise InputError(f"{flag} '{path}': cannot write in '{where}' (permission denied)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=STAGING_PREFIX + "probe-", dir=where))
    except OSError as exc:
        raise InputError(f"{flag} '{path}': cannot write in '{where}' "
                         f"({exc.strerror or exc})") from None


def check_staging_dir(hfs: HadoopFS | None, path: str, flag: str = "--staging-dir") -> str:
    """Refuse a staging directory the run could not write its copy of the encoded rows
    in; returns it qualified as the session sees it.

    Its nearest existing ancestor must be a directory the run can create a directory in
    (a uniquely named one is created and removed), on a file system that answers; the
    path itself, if it exists, a directory. Under Spark Connect (``hfs`` None) it is on
    the server's file system and not checked here. Called before anything is read.

    Raises
    ------
    InputError
        One line naming ``flag``.
    """
    try:
        q = hfs.qualify(path) if hfs is not None else path
        if hfs is None:  # Spark Connect: the server's file system, not this one's
            return q
        if scheme_of(q) in LOCAL_SCHEMES:
            writable(flag, os.path.realpath(local_path(q)))
            return q
        if hfs.state(q) == "file":
            raise InputError(f"{flag} '{path}' exists and is not a directory")
        where = q
        while hfs.state(where) == "missing" and hfs.parent(where) != where:
            where = hfs.parent(where)
        if hfs.state(where) == "file":
            raise InputError(f"{flag} '{path}': '{where}' is not a directory")
        hfs.probe(where)
        return q
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - an unreachable or refusing file system
        raise InputError(f"{flag} '{path}': cannot write there ({one_line(exc)})") from None


def hadoop_fs(spark) -> HadoopFS | None:
    """The Hadoop file systems of a classic session; None under Spark Connect."""
    try:
        sc = spark.sparkContext
        return HadoopFS(sc._jvm, sc._jsc.hadoopConfiguration())
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM in this process
        return None

