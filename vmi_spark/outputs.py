"""Where the job writes its outputs, and how it never harms what it did not write.

Every directory the job writes (``--output``, ``--write-selected``, ``--checkpoint-dir``,
the run's directory under ``--staging-dir`` and the staging directory next to each of the
first two) is resolved (:mod:`vmi_spark.files`) and must neither be, contain nor lie
inside an input or another output. An existing directory is replaced only when this job
could have written it: an empty directory, or a previous output recognised by its content
(:data:`OUTPUT_FILES`, or the :data:`SELECTED_MARKER` file the job writes into pruned
output, with the list of the files it wrote). A run *claims* each output
(:class:`Target`) before it reads anything by creating and locking its staging directory,
so of two concurrent runs with the same output the loser writes nothing; the claim is
removed when the run ends. What a run asks for is an :class:`OutputRequest`; anything
refused is a one-line error naming the flag and the path.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import check_checkpoint_free
from .core.report_schema import SelectionReport
from .errors import InputError, ParameterError
from .files import (
    LOCAL_SCHEMES,
    MARKER_BYTES,
    STAGING_PREFIX,
    HadoopFS,
    LocalFS,
    Location,
    NotOurs,
    check_overlaps,
    check_staging_dir,
    hadoop_fs,
    local_path,
    resolve,
    scheme_of,
    writable,
)
from .hints import default_fs_is_local

OUTPUT_FILES = frozenset({"selection.json", "report.md", "steps.csv", "bounds.png",
                          "stability.png"})
"""The only entries of an ``--output`` directory the job writes."""

SELECTED_MARKER = "_VMI_SPARK_SELECTED"
"""File the job writes into ``--write-selected`` output (Spark's readers skip ``_`` names)."""



@dataclass(frozen=True)
class OutputRequest:
    """What the job reads and writes, as the output checks need it (built once from the
    parsed arguments by :mod:`vmi_spark.job`).

    Attributes
    ----------
    output : str or None
        ``--output``, driver-local.
    write_selected : str or None
        ``--write-selected`` (a path without a scheme is on the session's file system).
    checkpoint_dir : str or None
        ``--checkpoint-dir``, driver-local.
    staging_dir : str or None
        ``--staging-dir``, where the run writes a fresh ``vmi-chunks-*`` directory.
    overwrite : bool
        ``--overwrite``: an existing previous ``--output`` may be replaced.
    input : str or None
        ``--input``, which no output may overlap.
    table : str or None
        ``--table``, named in messages about its location.
    """

    output: str | None = None
    write_selected: str | None = None
    checkpoint_dir: str | None = None
    staging_dir: str | None = None
    overwrite: bool = False
    input: str | None = None
    table: str | None = None

def previous_output(fs, path: str) -> str | None:
    """None if directory ``path`` holds a previous ``--output`` of the job, else why not."""
    names = fs.names(path)
    foreign = [n for n in names
               if n not in OUTPUT_FILES or fs.state(fs.join(path, n)) != "file"]
    if foreign:
        return f"it holds '{foreign[0]}', which the job never writes there"
    if "selection.json" not in names:
        return "it has no selection.json"
    return None


def marker_text(report: SelectionReport, files: Sequence[str] = ()) -> str:
    """The JSON of the :data:`SELECTED_MARKER` file for a pruned output of ``report``;
    ``files`` are the paths (relative, ``/``-separated) of every file the job wrote there,
    so that ``--overwrite`` can tell them from files added since."""
    return json.dumps({"writer": "vmi_spark", "kind": "write-selected", "version": 2,
                       "label": report.get("label"), "selected": report.get("selected"),
                       "input": report.get("input"), "files": sorted(files)},
                      default=str) + "\n"


#: names Spark's file writers give what they write (version 1 markers listed no files)
_SPARK_NAMES = re.compile(r"^(part-.*|\.part-.*\.crc|_SUCCESS|\._SUCCESS\.crc)$")
#: a Hive-style partition directory (``k=v``)
_PARTITION_DIR = re.compile(r"^[^=/]+=[^/]*$")
#: the marker's own checksum file (written where the file system keeps .crc files)
_MARKER_CRC = f".{SELECTED_MARKER}.crc"


#: a --write-selected directory holding the job's own earlier output (its marker, only the
#: files it wrote) is replaced without --overwrite, so that a scheduled run works every
#: week; anything else there is refused, as with --overwrite
REPLACE_SELECTED = True


def previous_selected(fs, path: str) -> str | None:
    """None if directory ``path`` holds a previous ``--write-selected`` output and nothing
    else, else why not.

    The job's marker must be there, and every other entry must be one the job wrote: a
    file the marker lists (or, for a marker of version 1, a name Spark's writers give
    their files in Hive-style ``k=v`` directories) or a directory holding one. A file
    added since, a link, anything else is refused: ``--overwrite`` never removes it.
    """
    text = fs.read_small(fs.join(path, SELECTED_MARKER), MARKER_BYTES)
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        data = None
    if not (isinstance(data, dict) and data.get("writer") == "vmi_spark"
            and data.get("kind") == "write-selected"):
        return f"it has no valid {SELECTED_MARKER} marker of this job"
    listed = data.get("files")
    if listed is not None and not (type(listed) is list
                                   and all(type(f) is str for f in listed)):
        return f"its {SELECTED_MARKER} marker does not list the files it wrote"
    files = set(listed) if listed is not None else None
    dirs = {f.rsplit("/", 1)[0] for f in files or () if "/" in f}
    dirs |= {d.rsplit("/", i)[0] for d in list(dirs) for i in range(1, d.count("/") + 1)}
    for rel, kind in fs.tree(path):
        name = rel.rsplit("/", 1)[-1]
        if rel in (SELECTED_MARKER, _MARKER_CRC) and kind == "file":
            continue
        if files is not None:
            # a checksum file beside a listed file (Hadoop's local file system hides them
            # from its own listings, so the list may not have them)
            crc = re.match(r"^\.(.+)\.crc$", name)
            sidecar = crc is not None and rel[:len(rel) - len(name)] + crc.group(1) in files
            ok = (rel in files or sidecar) if kind == "file" else kind == "dir" and rel in dirs
        else:
            ok = (kind == "file" and bool(_SPARK_NAMES.match(name))
                  or kind == "dir" and all(_PARTITION_DIR.match(x) for x in rel.split("/")))
        if not ok:
            what = "link" if kind == "link" else "file" if kind == "file" else "directory"
            return f"it holds the {what} '{rel}', which the job did not write there"
    return None


def staging_name(path: str) -> str:
    """The name of the staging directory (the claim) next to output ``path``."""
    base = posixpath.basename(path.rstrip("/")) or "root"
    return STAGING_PREFIX + (base if len(base) <= 200 else base[:200])


class Target:
    """One output directory: checked, claimed, filled in staging, committed, released.

    Parameters
    ----------
    flag : str
        The flag that named it.
    path : str
        The directory as ``fs`` addresses it (a resolved local path or a qualified URI).
    fs : LocalFS or HadoopFS
        Its file system.
    previous : callable
        ``previous(fs, path)`` is None for a directory this job wrote before, else why not.
    overwrite : bool
        Whether ``--overwrite`` was given.
    """

    def __init__(self, flag: str, path: str, fs, previous: Callable[[Any, str], str | None],
                 overwrite: bool) -> None:
        self.flag, self.path, self.fs = flag, path.rstrip("/") or "/", fs
        self.previous, self.overwrite = previous, overwrite
        self.staging = fs.join(fs.parent(self.path), staging_name(self.path))
        self.payload = fs.join(self.staging, "new")
        self._made: list[str] = []
        self._claimed = self._committed = False
        self._handle: Any = None

    def check(self, *, busy: bool = True) -> str:
        """Refuse a target this job may not write; returns its state.

        Raises
        ------
        InputError
            A file, a non-empty directory without ``--overwrite``, a directory the job did
            not write, or (with ``busy``) one another run is writing.
        """
        state = self.fs.state(self.path)
        if state in ("file", "link"):
            raise InputError(f"{self.flag} '{self.path}' exists and is not a directory")
        if state == "dir":
            if not self.overwrite:
                raise InputError(f"{self.flag} directory '{self.path}' exists and is not empty "
                                 "(use --overwrite to replace a previous output of this job)")
            why = self.previous(self.fs, self.path)
            if why:
                raise InputError(f"{self.flag} directory '{self.path}' is not a previous output "
                                 f"of this job ({why}); --overwrite replaces only that, so "
                                 "choose another directory")
        if busy:
            why = self.fs.not_ours(self.staging)
            if why:
                raise self._not_ours(why)
            if self.fs.busy(self.staging):
                raise InputError(f"{self.flag} '{self.path}' is being written by another run "
                                 f"('{self.staging}' exists; if no run is writing it, an "
                                 "interrupted run left it: remove it)")
        return state

    def _not_ours(self, why: str) -> InputError:
        return InputError(f"{self.flag} '{self.path}': '{self.staging}' {why}; the job uses "
                          "that name for its staging directory and never removes what it did "
                          f"not create: move it away or choose another {self.flag}")

    def claim(self) -> None:
        """Create and lock the staging directory (before anything is read).

        Raises
        ------
        InputError
            Another run holds it, or its directory cannot be written.
        """
        self.check(busy=False)
        try:
            self._made = self.fs.makedirs(self.fs.parent(self.path))
            self._handle = self.fs.claim(self.staging)
        except NotOurs as exc:
            self.release()
            raise self._not_ours(str(exc)) from None
        except FileExistsError:
            self.release()
            raise InputError(f"{self.flag} '{self.path}' is being written by another run "
                             f"('{self.staging}' exists)") from None
        except OSError as exc:
            self.release()
            raise InputError(f"{self.flag} '{self.path}': cannot write in "
                             f"'{self.fs.parent(self.path)}' "
                             f"({exc.strerror or exc})") from None
        self._claimed = True
        self.check(busy=False)

    def commit(self) -> None:
        """Move the staged content (``payload``) into place.

        A missing target is renamed into place whole. An existing target (empty, or a
        previous output with ``--overwrite``, checked again now) keeps its directory: its
        entries move into the staging directory and the new entries move in.
        """
        state = self.check(busy=False)
        if state == "missing":
            self.fs.rename(self.payload, self.path)
        else:
            old = self.fs.join(self.staging, "old")
            self.fs.makedirs(old)
            for name in self.fs.names(self.path):
                self.fs.rename(self.fs.join(self.path, name), self.fs.join(old, name))
            for name in self.fs.names(self.payload):
                self.fs.rename(self.fs.join(self.payload, name), self.fs.join(self.path, name))
        self._committed = True

    def release(self) -> None:
        """Remove the staging directory, and the parents this run created unless committed."""
        if self._claimed:
            self._claimed = False
            self.fs.unclaim(self.staging, self._handle)
        if not self._committed:
            for d in reversed(self._made):
                self.fs.remove_empty_dir(d)
        self._made = []


def check_before_spark(req: OutputRequest) -> None:
    """Every output check that needs no Spark session; called right after parsing.

    Resolves the outputs and the ``--input`` (local paths and URIs as given), refuses any
    overlap, and checks the driver-local outputs (``--output``, ``--checkpoint-dir``, a
    ``file:`` ``--write-selected``): kind, content, and a writable directory. A
    ``--write-selected`` without a scheme may be on the cluster's default file system, so its
    content is checked once the session exists (:func:`claims`, which also knows a
    ``--table``'s location), still before reading; where such a path names the driver's
    files (:func:`vmi_spark.hints.default_fs_is_local`), an existing file there is refused
    here.

    Raises
    ------
    InputError
        One line naming the flag.
    """
    outs = output_locations(req)
    ins = [resolve(req.input, "--input", pattern=True)] if req.input else []
    check_overlaps(outs, ins)
    local = LocalFS()
    if req.output:
        path = resolve(req.output, "--output", local_only=True).text
        Target("--output", path, local, previous_output, req.overwrite).check()
        writable("--output", path)
    if req.write_selected and scheme_of(req.write_selected) is None and default_fs_is_local() \
            and local.state(os.path.abspath(req.write_selected)) in ("file", "link"):
        raise InputError(f"--write-selected '{req.write_selected}' exists and is not a directory")
    if req.write_selected and scheme_of(req.write_selected) == "file":
        path = os.path.realpath(local_path(req.write_selected))
        Target("--write-selected", path, local, previous_selected, REPLACE_SELECTED).check()
        writable("--write-selected", path)
    if req.checkpoint_dir:
        path = resolve(req.checkpoint_dir, "--checkpoint-dir", local_only=True).text
        if local.state(path) in ("file", "link"):
            raise InputError(f"--checkpoint-dir '{req.checkpoint_dir}' exists and is not a "
                             "directory")
        state = local.state(os.path.join(path, CHECKPOINT_FILE))
        if state != "missing" and not local.regular(os.path.join(path, CHECKPOINT_FILE)):
            what = "a symbolic link" if state == "link" else "not a regular file"
            raise InputError(f"--checkpoint-dir '{req.checkpoint_dir}': "
                             f"'{os.path.join(path, CHECKPOINT_FILE)}' is {what}; the job reads "
                             "and replaces only a checkpoint file it wrote: move it away")
        _checkpoint_free(path)
        writable("--checkpoint-dir", path)
    staging = req.staging_dir
    if staging and scheme_of(staging) == "file":
        writable("--staging-dir", os.path.realpath(local_path(staging)))



def output_locations(req: OutputRequest, selected_qualified: str | None = None,
                     staging_qualified: str | None = None) -> list[Location]:
    """The locations the job writes, in flag order: ``--output``, ``--write-selected`` (as
    ``selected_qualified`` when given), ``--checkpoint-dir``, the ``vmi-chunks-*`` directory
    a run writes under ``--staging-dir`` (as ``staging_qualified`` when given), and the
    staging directories next to the first two."""
    outs: list[Location] = []
    for flag, path, local_only in (
            ("--output", req.output, True),
            ("--write-selected", selected_qualified or req.write_selected, False),
            ("--checkpoint-dir", req.checkpoint_dir, True),
            ("--staging-dir", staging_qualified or req.staging_dir, False)):
        if not path:
            continue
        loc = resolve(path, flag, local_only=local_only)
        if flag == "--write-selected" and selected_qualified:
            loc = replace(loc, given=req.write_selected or path)
        if flag == "--staging-dir" and staging_qualified:
            loc = replace(loc, given=req.staging_dir or path)
        if flag == "--staging-dir":  # the run writes a fresh vmi-chunks-<id> in it, only that
            loc = replace(loc, parts=loc.parts + ("vmi-chunks-*",))
        outs.append(loc)
        if flag in ("--output", "--write-selected") and loc.parts:
            staging = loc.parts[:-1] + (staging_name(loc.parts[-1]),)
            outs.append(Location(f"{flag} staging directory", loc.root + "/" + "/".join(staging),
                                 loc.root, staging))
    return outs


class Claims:
    """The claimed output targets of one run (a context manager releasing them all)."""

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = {t.flag: t for t in targets}

    def __enter__(self) -> Claims:
        done: list[Target] = []
        try:
            for t in sorted(self.targets.values(), key=lambda t: t.path):
                t.claim()
                done.append(t)
        except BaseException:
            for t in done:
                t.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for t in self.targets.values():
            t.release()

    def get(self, flag: str) -> Target | None:
        """The target of ``flag``, if any."""
        return self.targets.get(flag)


#: the schemes of the Spark paths the job claims and writes on the driver's own file
#: system (:func:`_on_session`); the others go through the session's Hadoop file system
_session_local: tuple[str | None, ...] = LOCAL_SCHEMES


@contextmanager
def file_uris_through_hadoop() -> Iterator[None]:
    """Claim, mark and commit ``file:`` URIs given to Spark (``--write-selected``) through
    the session's Hadoop file system, the code path of ``hdfs://`` or ``s3a://`` outputs,
    inside the block: the public seam that runs that path on a local disk (tests)."""
    global _session_local
    before, _session_local = _session_local, (None,)
    try:
        yield
    finally:
        _session_local = before


def _on_session(hfs: HadoopFS | None, flag: str, path: str) -> tuple[Any, str]:
    """(file system, path) of a Spark path as the session resolves it."""
    if hfs is not None:
        path = hfs.qualify(path)
    elif scheme_of(path) not in _session_local:
        raise InputError(f"{flag} '{path}': under Spark Connect the job writes and checks "
                         "outputs on the client's file system; give a local path both share")
    if scheme_of(path) in _session_local:
        return LocalFS(), os.path.realpath(local_path(path))
    return hfs, path


def claims(req: OutputRequest, spark, table_location: str | None = None) -> Claims:
    """The output targets of ``req`` as ``spark`` sees them, overlaps checked again.

    ``--input`` and ``--write-selected`` are qualified by the session's Hadoop
    configuration (a path without a scheme is on its default file system); ``--table``
    inputs are compared by ``table_location``. Enter the result to claim the targets.

    Raises
    ------
    InputError
        An overlap, or a target this job may not write.
    """
    hfs = hadoop_fs(spark)
    sel_fs, sel_path = (_on_session(hfs, "--write-selected", req.write_selected)
                        if req.write_selected else (None, None))
    inputs = []
    if req.input:
        q = hfs.qualify(req.input) if hfs is not None else req.input
        inputs.append(replace(resolve(q, "--input", pattern=True), given=req.input))
    elif table_location:
        inputs.append(replace(resolve(table_location, "--table"), given=req.table or table_location))
    sel_q = (sel_path if sel_fs is hfs or sel_path is None
             else "file:" + sel_path)
    staging = req.staging_dir
    staging_q = check_staging_dir(hfs, staging) if staging else None
    check_overlaps(output_locations(req, selected_qualified=sel_q,
                                    staging_qualified=staging_q), inputs)
    targets = []
    if req.output:
        targets.append(Target("--output", resolve(req.output, "--output", local_only=True).text,
                              LocalFS(), previous_output, req.overwrite))
    if sel_path is not None:
        targets.append(Target("--write-selected", sel_path, sel_fs, previous_selected,
                              REPLACE_SELECTED))
    return Claims(targets)


def _checkpoint_free(path: str) -> None:
    """Refuse a ``--checkpoint-dir`` another run holds
    (:func:`vmi_spark.checkpoint.check_checkpoint_free`)."""
    try:
        check_checkpoint_free(path)
    except ParameterError as exc:
        raise InputError(exc.phrase("cli")) from None
