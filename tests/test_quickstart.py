"""What a new user runs first (issue 17, item 5): the README quick start, ``gym.make`` with and
without the import, and ``docs/cli.md`` covering every command.

The quick start runs verbatim (extracted from README.md) in a fresh interpreter with an empty
data home, so the bundled sample is what it sees; its answer is checked against the record's
ambiguity read from ``records.jsonl``, not against the oracle.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ambitab_gym
from ambitab_gym.cli import build_parser
from ambitab_gym.oracles.base import REFUSAL

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_DOCS = ROOT / "docs" / "cli.md"
BIRD_RECORDS = Path(ambitab_gym.__file__).parent / "corpora" / "bird" / "records.jsonl"


def _python(code: str, home: Path) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (nothing imported) with its own empty data home."""
    env = {**os.environ, "AMBITAB_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=home,
    )


def _quickstart() -> str:
    """The Python block under README's '## Quick start' heading, verbatim."""
    text = README.read_text("utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    block = re.search(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the quick start has no python code block"
    return block.group(1)


def test_readme_quickstart_gets_an_answer(tmp_path):
    code = _quickstart()
    assert "import ambitab_gym" in code and 'gym.make("AmbiTab-Bird-v0", split="train")' in code
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout

    # the task it printed is a bundled Bird record; read that record from the file (the
    # readings of an AVT share the request: the answer tells which one was drawn)
    request = re.search(r"^Request: (.+)$", out, re.M).group(1)
    question = re.search(r"^Q1: (.+)$", out, re.M).group(1)
    answer = re.search(r"^A1: (.+)$", out, re.M).group(1)
    records = [json.loads(line) for line in BIRD_RECORDS.read_text("utf-8").splitlines()]
    readings = [
        r for r in records if r["spec"]["request"] == request and r["spec"]["database"] in out
    ]
    assert readings, f"no bundled Bird record asks {request!r}"
    (record,) = [
        r
        for r in readings
        if any(answer in (a.get("resolution"), a.get("response")) for a in r["ambiguities"])
    ] or readings[:1]
    # the quick start names the split a training loop should use, and its task is from it
    assert record["split"] == "train", record["id"]
    assert answer != REFUSAL, f"the quick start's question {question!r} was refused"
    # the question names one of the record's terms, and the answer is that term's resolution
    asked = [
        a
        for a in record["ambiguities"]
        if any(t.lower() in question.lower() for t in [a["term"], *a.get("aliases", [])])
    ]
    assert asked, f"{question!r} names none of the record's terms"
    assert answer in {a[key] for a in asked for key in ("resolution", "response") if a.get(key)}
    # one productive question covering every counted ambiguity: p = r = 1, question-F1 1
    counted = [a for a in record["ambiguities"] if a["kind"] in ("critical", "knowledge")]
    assert len(counted) == len(asked) == 1
    assert out.strip().splitlines()[-1] == "1.0"
    # the README shows the answer it gets
    assert f"# A1: {answer}" in README.read_text("utf-8")


def test_gym_make_with_the_module_in_the_id_needs_no_import(tmp_path):
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'ambitab_gym' not in sys.modules\n"
        "env = gym.make('ambitab_gym:AmbiTab-Bird-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, obs['task'].splitlines()[0])\n"
    )
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("AmbiTabEnv Request: ")


def test_bare_id_without_the_import_fails_as_documented(tmp_path):
    """Gymnasium 1.x has no plugin entry points: the failure is Gymnasium's own, and the README
    and the package docstring say so and give the import-free form."""
    code = (
        "import gymnasium as gym\n"
        "try:\n"
        "    gym.make('AmbiTab-Bird-v0')\n"
        "except gym.error.NameNotFound as error:\n"
        "    print('NameNotFound', error)\n"
    )
    result = _python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("NameNotFound Environment `AmbiTab-Bird` doesn't exist")
    for text in (README.read_text("utf-8"), ambitab_gym.__doc__):
        assert 'gym.make("ambitab_gym:AmbiTab-Bird-v0")' in text


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_cli_docs_cover_every_command_in_help_order():
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    commands = list(subparsers.choices)
    text = CLI_DOCS.read_text("utf-8")
    sections = re.findall(r"^## `ambitab-gym (\w+)", text, re.M)
    missing = [c for c in commands if c not in sections]
    assert not missing, f"docs/cli.md has no section for: {missing}"
    assert sections == sorted(sections), "command sections follow --help (alphabetical)"
    # every command is in the overview table too
    for command in commands:
        assert re.search(rf"^\| \[`{command}`\]\(#", text, re.M), command


@pytest.mark.parametrize("command", ["evaluate", "leakage"])
def test_cli_docs_name_every_campaign_option(command):
    """Every option of the main group of evaluate/leakage --help is in docs/cli.md (the LLM
    groups are documented in docs/llm.md)."""
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    sub = subparsers.choices[command]
    main_group = next(g for g in sub._action_groups if g.title in ("options", "optional arguments"))
    options = [o for a in main_group._group_actions for o in a.option_strings if o.startswith("--")]
    assert "--seeds" in options
    text = CLI_DOCS.read_text("utf-8")
    section = re.search(r"^## `ambitab-gym evaluate.*?(?=^## )", text, re.S | re.M).group(0)
    if command == "leakage":
        leakage = re.search(r"^## `ambitab-gym leakage.*?(?=^## )", text, re.S | re.M).group(0)
        section += leakage + (ROOT / "docs" / "leakage.md").read_text("utf-8")
    missing = [o for o in options if o != "--help" and f"`{o}" not in section]
    assert not missing, f"{command} options missing from docs/cli.md: {missing}"


def test_cli_docs_anchors_resolve():
    text = CLI_DOCS.read_text("utf-8")
    anchors = {_slug(h) for h in re.findall(r"^#{2,4} (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links
    broken = sorted({link for link in links if link not in anchors})
    assert not broken, f"links to missing headings in docs/cli.md: {broken}"


@pytest.mark.parametrize(
    "column",
    [
        "SR none",
        "SR asker",
        "SR full",
        "Precision",
        "Recall",
        "F1",
        "Gain",
        "Gap",
        "Unreadable m/r/a/s",
        "Reveals SQL",
        "Fallback",
        "dJ_resp",
        "dRec_spec^Q",
        "dJ_full",
        "dRec_none",
    ],
)
def test_glossary_explains_printed_columns(column):
    text = CLI_DOCS.read_text("utf-8")
    glossary = text[text.index("## Column glossary") :]
    assert re.search(rf"^\| `{re.escape(column)}` \| \S", glossary, re.M), column


def test_glossary_matches_the_evaluate_table_header():
    """Every column the evaluate table prints (read from the formatter) has a glossary row."""
    from ambitab_gym.evaluation.summary import format_table, summarize_campaign

    row = {"condition": "none", "seed": 0, "success": 1.0, "precision": None, "recall": None}
    table = format_table({"bird": summarize_campaign([{**row, "f1": None, "error": None}])})
    columns = re.split(r"\s{2,}", table.splitlines()[0].strip())
    assert columns[:3] == ["Corpus", "SR none", "SR asker"]
    glossary = CLI_DOCS.read_text("utf-8").split("## Column glossary")[1]
    missing = [c for c in columns if f"| `{c}` |" not in glossary]
    assert not missing, f"evaluate columns without a row in docs/cli.md's glossary: {missing}"
