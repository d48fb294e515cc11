"""Packaging metadata (issue 17, item 5): the built wheel, the citation file and the changelog.

A wheel is built from a copy of the working tree (``pip wheel --no-deps
--no-build-isolation``: offline, about two seconds) and read back as a zip: its ``METADATA``
is parsed with the standard library's email parser, and the files it must bundle are listed
from the source tree, not from ``pyproject.toml``.
"""

from __future__ import annotations

import email.parser
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import date
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import ambitab_gym

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a package
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ambitab_gym"
PAPER_TITLE = (
    "Conversational Task Disambiguation over Tabular Data: Leakage-Aware Formulation, "
    "Benchmark Suite, and Training"
)
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
    ".ruff_cache", "*.duckdb", "*.duckdb.wal", "results",
)  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source") / "ambitab-gym"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (path,) = out.glob("ambitab_gym-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


@pytest.fixture(scope="module")
def metadata(wheel):
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(wheel.read(name).decode("utf-8"))


def test_version_is_single_sourced(wheel, metadata):
    version = ambitab_gym.__version__
    Version(version)  # a valid PEP 440 version
    assert metadata["Version"] == version
    assert any(n.startswith(f"ambitab_gym-{version}.dist-info/") for n in wheel.namelist())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    # no second literal version in the package
    literal = re.compile(r"^__version__\s*=", re.M)
    holders = [
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*.py")
        if literal.search(p.read_text("utf-8"))
    ]
    assert holders == ["ambitab_gym/_version.py"]
    cli = subprocess.run(
        [sys.executable, "-m", "ambitab_gym", "--version"], capture_output=True, text=True
    )
    assert cli.stdout.strip() == version


def test_classifiers_urls_and_licence(wheel, metadata):
    classifiers = set(metadata.get_all("Classifier"))
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert {
        "Operating System :: OS Independent",
        "Typing :: Typed",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    } <= classifiers
    # PEP 639: the licence is an SPDX expression; licence classifiers are superseded
    assert metadata["License-Expression"] == "MIT AND CC-BY-4.0"
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert metadata["License"] is None  # the deprecated free-text field is gone
    assert metadata.get_all("License-File") == ["LICENSE"]
    licence = wheel.read(next(n for n in wheel.namelist() if n.endswith("licenses/LICENSE")))
    text = licence.decode("utf-8")
    assert text.startswith("MIT License") and "(CC BY 4.0)" in text
    assert metadata["Requires-Python"] == ">=3.10"
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert urls and all(u.startswith("https://") for u in urls.values())
    assert urls["Paper"] == "https://arxiv.org/abs/2610.10740"


def test_build_backend_supports_the_licence_expression():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    (setuptools,) = [
        Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")
    ]
    assert not setuptools.specifier.contains("76.9")  # license = "SPDX" needs setuptools >= 77
    import setuptools as installed

    assert setuptools.specifier.contains(installed.__version__)


def test_extras_datasets(metadata):
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    assert "datasets" in metadata.get_all("Provides-Extra")
    for extra in ("datasets", "test"):
        (req,) = [
            r for r in requires if r.name == "datasets" and r.marker.evaluate({"extra": extra})
        ]
        assert not req.specifier.contains("4.6") and req.specifier.contains("4.7")


def test_wheel_bundles_py_typed_corpora_and_assets(wheel):
    names = set(wheel.namelist())
    assert "ambitab_gym/py.typed" in names
    assert (PACKAGE / "py.typed").is_file()
    expected = []
    for corpus in sorted((PACKAGE / "corpora").iterdir()):
        if not (corpus / "manifest.json").is_file():
            continue
        files = [corpus / "manifest.json", corpus / "records.jsonl"]
        files += sorted((corpus / "databases").glob("*.sql"))
        expected += [f.relative_to(ROOT).as_posix() for f in files]
    assert len({e.split("/")[2] for e in expected}) >= 6  # the six bundled corpora
    missing = sorted(set(expected) - names)
    assert not missing, f"not in the wheel: {missing}"
    for name in expected:  # bundled byte for byte
        assert wheel.read(name) == (ROOT / name).read_bytes()
    assets = [p.relative_to(ROOT).as_posix() for p in (PACKAGE / "evaluation" / "assets").iterdir()]
    assert assets and set(assets) <= names
    # every file of the package (code and data) is in the wheel
    package_files = {
        f.relative_to(ROOT).as_posix()
        for f in PACKAGE.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
    }
    assert not sorted(package_files - names), "package files left out of the wheel"
    entry_points = wheel.read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    ).decode()
    assert "ambitab-gym = ambitab_gym.cli:entry" in entry_points


def test_citation_file_is_cff_1_2():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text("utf-8"))
    # the keys CFF 1.2.0 requires, and the values this project states
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == ambitab_gym.__version__
    assert cff["type"] == "software"
    assert cff["license"] == "MIT"  # the code's licence (CFF has no AND expressions)
    date.fromisoformat(str(cff["date-released"]))
    for author in cff["authors"]:
        assert author.get("name") or author.get("family-names")
    paper = cff["preferred-citation"]
    assert {"type", "title", "authors"} <= set(paper)
    assert " ".join(paper["title"].split()) == PAPER_TITLE
    assert paper["type"] == "article" and paper["year"] == 2026
    assert [a["family-names"] for a in paper["authors"]] == [
        "Ghoroghchian", "Scoccola", "Sedaghat", "Vaheb", "Chen", "D'Agostino", "Golestan",
    ]  # fmt: skip
    assert all(set(a) == {"family-names", "given-names"} for a in paper["authors"])
    assert paper["url"] == "https://arxiv.org/abs/2610.10740"


def test_changelog_has_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text("utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert headings[0] == ("Unreleased", "")  # Keep a Changelog: newest first
    versions = {v: d for v, d in headings[1:]}
    assert ambitab_gym.__version__ in versions
    date.fromisoformat(versions[ambitab_gym.__version__])
    released = [Version(v) for v, _ in headings[1:]]
    assert released == sorted(released, reverse=True)
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_readme_names_every_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("## Dependencies") :]
    missing = [e for e in extras if f"`{e}`" not in section]
    assert not missing, f"extras not described in README's Dependencies: {missing}"
