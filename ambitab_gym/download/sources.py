"""The pinned table of upstream downloads (``ambitab-gym download SOURCE``).

* :class:`Artifact` - one thing to fetch: an archive at a pinned URL, a Hugging Face dataset
  repository at a pinned revision, or a file the user downloads by hand (``--file``).
* :class:`Source` - what ``download SOURCE`` installs (its artifacts, in order), under which
  licence, whether it may be fetched without the user's explicit consent, and which
  ``build`` runs afterwards.
* :data:`SOURCES` - the table; :func:`get_source` looks one up with a helpful error.

Checksums: an artifact's ``sha256`` is pinned only where a documented value exists (see
``docs/data.md``). ``None`` means *trust on first use*: the SHA-256 computed on the first
download is recorded in the data home and every later download must match it (``--sha256``
pins a value by hand). Hugging Face files are verified one by one against the SHA-256 (large
files) or the git blob id (small files) that the Hub publishes for the pinned revision.

The converter table (``ambitab_gym.convert.builder.SOURCES``) is referenced by name in
:attr:`Source.build`, never copied.

Example:
    >>> source = get_source("bird-dev")
    >>> source.artifacts[0].url
    'https://bird-bench.oss-cn-beijing.aliyuncs.com/dev.zip'
    >>> source.build, source.policy
    ('ew-bird', 'open')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ambitab_gym.errors import UnknownComponent

__all__ = ["SOURCES", "Artifact", "Source", "get_source", "source_names"]

ArtifactKind = Literal["archive", "huggingface", "manual"]
Policy = Literal["open", "acknowledge", "manual"]


@dataclass(frozen=True)
class Artifact:
    """One download: where it comes from, how to check it and where it is installed.

    Attributes:
        name: the folder under ``<data home>/upstream/`` it is installed in (also the key of
            its trust-on-first-use checksum).
        kind: ``archive`` (a zip or tar at ``url``), ``huggingface`` (a dataset repository,
            ``repo`` at ``revision``) or ``manual`` (a file given with ``--file``).
        url: the pinned URL (archives).
        sha256: the pinned SHA-256 of the archive, or None (trust on first use).
        size: the archive's size in bytes, when documented.
        repo, revision: the Hugging Face dataset and the commit (huggingface).
        layout: paths that must exist in the installed folder (checked before it is moved
            into place: a wrong archive installs nothing).
        unpack_nested: names of archives inside the archive to unpack in place
            (BIRD ships ``dev_databases.zip`` inside ``dev.zip``).
        filename: the archive's file name (also its name on a ``--url-base`` mirror), or the
            name a single manual file is installed under (``ambrosia.csv``).
        checksum_source: where a pinned ``sha256`` comes from (for ``docs/data.md``).

    Example:
        >>> Artifact("x", "archive", url="https://example.org/x.zip").sha256 is None
        True
    """

    name: str
    kind: ArtifactKind
    url: str | None = None
    sha256: str | None = None
    size: int | None = None
    repo: str | None = None
    revision: str | None = None
    layout: tuple[str, ...] = ()
    unpack_nested: tuple[str, ...] = ()
    filename: str | None = None
    checksum_source: str = ""


@dataclass(frozen=True)
class Source:
    """What ``ambitab-gym download NAME`` installs and builds.

    Attributes:
        name: the command-line name.
        title: a one-line description.
        licence: the upstream licence, as its authors state it.
        policy: ``open`` (fetched by ``download`` and ``download --all``), ``acknowledge``
            (no licence upstream: fetched only with ``--accept-unlicensed``, never by
            ``--all`` without it) or ``manual`` (the user downloads it; ``--file PATH``).
        artifacts: what is installed, in order (a source may reuse another's artifact, e.g.
            AmbiQT needs Spider's databases).
        build: the ``ambitab-gym build`` source run afterwards, or None.
        steps: what the user does by hand (manual and acknowledge sources).
        pool: the paper's evaluated pool (Table 4).
        homepage: the upstream project's page.

    Example:
        >>> get_source("ambiqt").build
        'ambiqt'
    """

    name: str
    title: str
    licence: str
    policy: Policy
    artifacts: tuple[Artifact, ...]
    build: str | None = None
    steps: tuple[str, ...] = ()
    pool: str = ""
    homepage: str = ""


#: AmbiQT at its last commit (2023-10-15); GitHub builds archives on the fly and does not
#: promise stable bytes, so its checksum is trusted on first use.
AMBIQT_COMMIT = "2dd908bd4a7173f98fa6637758f4d41852722a5c"

SPIDER = Artifact(
    name="spider",
    kind="archive",
    # Spider 1.0, the 2020-08-03 corrected release, as linked from yale-lily.github.io/spider
    url="https://drive.usercontent.google.com/download?id=1TqleXec_OykOYFREKKtschzY29dUcVAQ"
    "&export=download&confirm=t",
    sha256="5ddff97bb1d421282c593e8d30ce0ce107270f4dd4a21d60eba4bf287d5956b1",
    size=99_736_136,
    layout=("database", "tables.json"),
    filename="spider.zip",
    checksum_source="a third-party provenance record that compared the Google Drive file "
    "with the Hugging Face mirrors' published git-LFS SHA-256",
)

AMBIQT = Artifact(
    name="ambiqt",
    kind="archive",
    url=f"https://github.com/testzer0/AmbiQT/archive/{AMBIQT_COMMIT}.zip",
    layout=("benchmark/col-synonyms/validation.json",),
    filename="AmbiQT.zip",
)

BIRD_DEV = Artifact(
    name="bird-dev",
    kind="archive",
    url="https://bird-bench.oss-cn-beijing.aliyuncs.com/dev.zip",
    layout=("dev.json", "dev_databases"),
    unpack_nested=("dev_databases.zip",),
    filename="dev.zip",
)

BIRD_TRAIN = Artifact(
    name="bird-train",
    kind="archive",
    url="https://bird-bench.oss-cn-beijing.aliyuncs.com/train.zip",
    layout=("train.json", "train_databases"),
    unpack_nested=("train_databases.zip",),
    filename="train.zip",
)

#: birdsql/mini-interact: the public tasks over SQLite databases (solutions withheld upstream)
MINI_INTERACT = Artifact(
    name="mini-interact",
    kind="huggingface",
    repo="birdsql/mini-interact",
    revision="fe8575fa1a859c5e113bbfde631ca27ef41b0be7",
    layout=("mini_interact.jsonl",),
)

TACO = Artifact(
    name="taco",
    kind="archive",
    # the link in TACO-Benchmark's README (Google Drive file 1TcQOZoU2SkQQA5COQIux2cTIuMY1uzCi)
    url="https://drive.usercontent.google.com/download?id=1TcQOZoU2SkQQA5COQIux2cTIuMY1uzCi"
    "&export=download&confirm=t",
    layout=("us/data",),
    filename="taco.zip",
)

AMBROSIA = Artifact(
    name="ambrosia",
    kind="manual",
    layout=("ambrosia.csv",),
    filename="ambrosia.csv",
)

AMBITAB_BIRD = Artifact(
    name="ambitab-bird",
    kind="manual",
    layout=("records.jsonl",),
    filename="records.jsonl",
)

_BIRD_LICENCE = "CC BY-SA 4.0 (BIRD's README; earlier releases said CC BY-NC 4.0)"

SOURCES: dict[str, Source] = {
    source.name: source
    for source in (
        Source(
            name="ambiqt",
            title="AmbiQT (column synonyms) with Spider 1.0's databases",
            licence="AmbiQT code MIT; its data and Spider CC BY-SA 4.0",
            policy="open",
            artifacts=(SPIDER, AMBIQT),
            build="ambiqt",
            pool="1,722 records, 172 databases (861 retained source items)",
            homepage="https://github.com/testzer0/AmbiQT",
        ),
        Source(
            name="spider",
            title="Spider 1.0 (the databases AmbiQT renames columns in)",
            licence="CC BY-SA 4.0",
            policy="open",
            artifacts=(SPIDER,),
            homepage="https://yale-lily.github.io/spider",
        ),
        Source(
            name="bird-dev",
            title="BIRD dev (tasks, evidence and the 11 dev databases)",
            licence=_BIRD_LICENCE,
            policy="open",
            artifacts=(BIRD_DEV,),
            build="ew-bird",
            pool="EW-Bird dev: 446 records, 11 databases",
            homepage="https://bird-bench.github.io/",
        ),
        Source(
            name="bird-train",
            title="BIRD train (tasks, evidence and the 69 train databases)",
            licence=_BIRD_LICENCE,
            policy="open",
            artifacts=(BIRD_TRAIN,),
            build="ew-bird",
            pool="EW-Bird train: 2,091 records, 67 databases",
            homepage="https://bird-bench.github.io/",
        ),
        Source(
            name="bird-interact",
            title="BIRD-Interact's public Mini-Interact release (tasks, SQLite databases, "
            "knowledge bases)",
            licence="CC BY-SA 4.0",
            policy="open",
            artifacts=(MINI_INTERACT,),
            build="bird-interact",
            steps=(
                "The public task file withholds the solutions (sol_sql, test cases); the BIRD "
                "team sends them on request (see https://bird-interact.github.io/).",
                "With them: ambitab-gym download bird-interact --ground-truth SOLUTIONS.jsonl "
                "(or ambitab-gym build bird-interact --source <data home>/upstream/"
                "mini-interact --ground-truth SOLUTIONS.jsonl).",
            ),
            pool="paper: 600 records on BIRD-Interact-Lite's 22 PostgreSQL databases "
            "(not public as a download); Mini-Interact is the public SQLite release",
            homepage="https://huggingface.co/datasets/birdsql/mini-interact",
        ),
        Source(
            name="taco",
            title="TACO-Benchmark (us and beijing splits)",
            licence="none stated: the TACO-Benchmark repository carries no licence file",
            policy="acknowledge",
            artifacts=(TACO,),
            build="taco",
            steps=(
                "TACO-Benchmark's repository carries no licence, so no terms grant you the "
                "right to use or redistribute the data; its README says the us and beijing "
                "data are 'freely available for download' from Google Drive.",
                "If you have checked that your use is permitted (ask the authors when in "
                "doubt), run: ambitab-gym download taco --accept-unlicensed",
                "If Google Drive answers with a web page instead of the archive, download it "
                "in a browser from https://drive.google.com/file/d/"
                "1TcQOZoU2SkQQA5COQIux2cTIuMY1uzCi/view and run: ambitab-gym download taco "
                "--accept-unlicensed --file PATH",
            ),
            pool="187 records, 16 databases (187 of 5,159 US query files survive)",
            homepage="https://github.com/TACO-Benchmark",
        ),
        Source(
            name="ambrosia",
            title="Ambrosia (scope, attachment and vagueness ambiguities)",
            licence="CC BY 4.0; the authors ask that the data not be re-uploaded publicly",
            policy="manual",
            artifacts=(AMBROSIA,),
            build="ambrosia",
            steps=(
                "Ambrosia's authors distribute the data from https://ambrosia-benchmark."
                "github.io/ as a password-protected archive (the password is given on "
                "the website) and ask that it not be re-uploaded to public places, so "
                "ambitab-gym does not fetch it.",
                "Download the archive from the website and unzip it with the password.",
                "Run: ambitab-gym download ambrosia --file PATH/TO/ambrosia.csv",
            ),
            pool="2,670 records, 763 databases (the official test partition)",
            homepage="https://ambrosia-benchmark.github.io/",
        ),
        Source(
            name="ambitab-bird",
            title="AmbiTab-Bird records (released by the AmbiTab authors) over BIRD's databases",
            licence="BIRD CC BY-SA 4.0; the released records under their own licence",
            policy="manual",
            artifacts=(AMBITAB_BIRD,),
            build="bird",
            steps=(
                "AmbiTab-Bird's rewrites were made by a model, so the reproducible path "
                "imports the records the AmbiTab authors release; the paper says code and "
                "data come with its next version, and there is no URL to pin yet.",
                "Install BIRD's databases first: ambitab-gym download bird-dev (and "
                "bird-train for the train split).",
                "Run: ambitab-gym download ambitab-bird --file PATH/TO/records.jsonl",
                "Without released records: ambitab-gym build bird --source <BIRD dev folder> "
                "--llm-url URL --model NAME (rewrites with your model).",
            ),
            pool="train 537 records (42 databases), dev 127 records (11 databases)",
        ),
    )
}


def source_names() -> list[str]:
    """Every download source name, in table order.

    >>> source_names()[:3]
    ['ambiqt', 'spider', 'bird-dev']
    """
    return list(SOURCES)


def get_source(name: str) -> Source:
    """The source called ``name``; an unknown name lists the valid ones.

    >>> get_source("nope")
    Traceback (most recent call last):
    ...
    ambitab_gym.errors.UnknownComponent: unknown download source 'nope'; use one of: ...
    """
    key = name.strip().lower()
    if key not in SOURCES:
        raise UnknownComponent("download source", name, SOURCES)
    return SOURCES[key]
