"""docker/Dockerfile: a pinned Debian base and a JRE package of that Debian release.

The image cannot be built here (no Docker engine, no Docker Hub); this guards the
mistake that broke it: an unpinned ``python:3.11-slim`` moved from Debian 12 to 13,
where ``openjdk-17-jre-headless`` does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the OpenJDK runtimes each Debian release ships (packages.debian.org, main)
JRES = {"bookworm": {17}, "trixie": {21, 25}}


def _instructions(text: str) -> list[str]:
    """Dockerfile instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(ln for ln in text.splitlines()
                                            if not ln.lstrip().startswith("#")))
    return [ln.strip() for ln in joined.splitlines() if ln.strip()]


def test_base_is_pinned_and_its_jre_exists_there():
    steps = _instructions((ROOT / "docker" / "Dockerfile").read_text())
    bases = [s.split()[1] for s in steps if s.upper().startswith("FROM ")]
    assert len(bases) == 1, bases
    m = re.fullmatch(r"python:3\.\d+-slim-([a-z]+)", bases[0])
    assert m, f"base {bases[0]!r} is not pinned to a Debian release"
    release = m.group(1)
    assert release in JRES, f"unknown Debian release {release!r}"
    jres = {int(v) for s in steps if s.upper().startswith("RUN ")
            for v in re.findall(r"\bopenjdk-(\d+)-jre-headless\b", s)}
    assert len(jres) == 1, jres
    assert jres <= JRES[release], f"openjdk-{jres} is not in Debian {release}"
    assert jres.pop() in (17, 21), "Spark 4 supports Java 17 and 21"
    # pyspark is an extra of the package: the image must ask for it
    assert any(re.search(r"pip install .*\.\[[^\]]*\bspark\b", s) for s in steps)


def test_docker_readme_names_the_same_base_and_jre():
    text = (ROOT / "docker" / "README.md").read_text()
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    base = re.search(r"^FROM (\S+)", dockerfile, re.M).group(1)
    jre = re.search(r"openjdk-\d+-jre-headless", "\n".join(_instructions(dockerfile))).group(0)
    table = next(ln for ln in text.splitlines() if ln.startswith("| `Dockerfile` |"))
    assert f"`{base}`" in table and f"`{jre}`" in table
    assert "image was not built" in text


def test_the_image_installs_each_extra_once():
    """issue 44 (d): the image asked for `.[spark,fast]` where [spark] already has numba.
    Every extra it names adds a requirement the others lack, and the image gets the
    compiled loops, the plots and the scikit-learn selector; the README says the same."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    steps = _instructions((ROOT / "docker" / "Dockerfile").read_text())
    asked = [m.group(1).split(",") for s in steps
             for m in [re.search(r"pip install [^&]*\.\[([^\]]*)\]", s)] if m]
    assert len(asked) == 1, steps
    names = {e: {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in extras[e.strip()]}
             for e in asked[0]}
    for e, reqs in names.items():
        others = set().union(*(r for o, r in names.items() if o != e))
        assert not reqs <= others, f"[{e}] adds nothing to {sorted(set(names) - {e})}"
    assert {"pyspark", "numba", "matplotlib", "scikit-learn"} <= set().union(*names.values())
    table = next(ln for ln in (ROOT / "docker" / "README.md").read_text().splitlines()
                 if ln.startswith("| `Dockerfile` |"))
    assert f'pip install ".[{",".join(asked[0])}]"' in table
