"""``ambitab-gym download`` against a real HTTP server on 127.0.0.1.

The server (tests/download_fixtures.py) serves archives built here, in each upstream's
layout, from the real samples in ``../shared/upstream``; it honours ``Range`` and can close a
response early. Expected values are computed independently: digests with hashlib on the served
bytes, installed files compared byte for byte with the samples, built corpora compared with a
direct ``build_corpus`` on the samples.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from download_fixtures import (
    AMBIQT,
    BIRD,
    MINI_INTERACT,
    UPSTREAM,
    MirrorServer,
    ambiqt_zip,
    ambrosia_csv,
    bird_dev_zip,
    bird_zip,
    hub_tree,
    spider_zip,
    taco_zip,
)

from ambitab_gym.cli import main
from ambitab_gym.convert import BuildOptions, build_corpus
from ambitab_gym.corpora.corpus import load_corpus
from ambitab_gym.download import DownloadError, DownloadOptions, download, fetch
from ambitab_gym.download.fetch import http_client
from ambitab_gym.download.sources import AMBIQT_COMMIT, get_source

needs_samples = pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason="../shared/upstream (the upstream samples) is absent"
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["download", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def leftovers(up: Path) -> list[str]:
    """Staging folders, set-aside old copies and partial files anywhere under upstream/."""
    return sorted(
        p.name
        for p in up.rglob("*")
        if p.name.startswith((".staging-", ".old-")) or ".old-" in p.name or p.suffix == ".part"
    )


@pytest.fixture
def server():
    with MirrorServer() as mirror:
        yield mirror


def serve_spider(server: MirrorServer) -> bytes:
    data = spider_zip()
    server.files["/spider/spider.zip"] = data
    return data


@needs_samples
def test_ambiqt_downloads_verifies_installs_and_builds(capsys, data_home, server, tmp_path):
    spider = serve_spider(server)
    ambiqt = ambiqt_zip(AMBIQT_COMMIT)
    server.files["/ambiqt/AmbiQT.zip"] = ambiqt
    up = data_home / "upstream"

    # Spider's pinned checksum is the real archive's: the fixture is accepted with --sha256
    status, out, err = run(capsys, "spider", "--url-base", server.base, "--sha256", sha(spider))
    assert status == 0, err
    for db in (AMBIQT / "spider" / "database").iterdir():
        installed = up / "spider" / "database" / db.name / f"{db.name}.sqlite"
        assert installed.read_bytes() == (db / f"{db.name}.sqlite").read_bytes()
    assert not (up / "spider" / "__MACOSX").exists()
    record = json.loads((up / "spider" / ".ambitab-download.json").read_text())
    assert (record["sha256"], record["checksum"], record["top_folder"]) == (
        sha(spider), "given", "spider",
    )  # fmt: skip

    status, out, err = run(capsys, "ambiqt", "--url-base", server.base, "--json")
    assert status == 0, err
    result = json.loads(out.strip().splitlines()[-1])["reports"][0]
    checks = {a["name"]: a["checksum"] for a in result["artifacts"]}
    assert checks == {"spider": "installed", "ambiqt": "recorded"}
    assert len(server.requests("/spider/spider.zip")) == 1  # installed Spider is not fetched again
    assert "trust on first use" in err
    # trust on first use: the digest of the served bytes is recorded
    recorded = json.loads((up / "checksums.json").read_text())
    assert recorded["ambiqt"]["sha256"] == sha(ambiqt)
    assert recorded["spider"]["sha256"] == sha(spider)
    validation = up / "ambiqt" / "benchmark" / "col-synonyms" / "validation.json"
    assert (
        validation.read_bytes()
        == (AMBIQT / "AmbiQT" / "benchmark" / "col-synonyms" / "validation.json").read_bytes()
    )
    assert not list((up / ".downloads").rglob("*.zip"))  # the archive is not kept by default

    # the built corpus loads and equals a direct build of the samples
    assert result["build"]["corpus"] == "ambiqt" and "error" not in result["build"]
    corpus = load_corpus("ambiqt")
    assert corpus.origin == "built"
    direct = build_corpus(
        "ambiqt",
        BuildOptions(source=AMBIQT / "AmbiQT", databases=AMBIQT / "spider" / "database"),
        out=tmp_path / "direct",
    )
    assert direct.ok
    assert len(corpus) == direct.records == result["build"]["records"] > 0
    assert sorted(r.id for r in corpus.records) == sorted(
        r.id for r in load_corpus(tmp_path / "direct").records
    )
    assert leftovers(up) == []


@needs_samples
def test_a_changed_archive_fails_its_recorded_checksum(capsys, data_home, server):
    first = ambiqt_zip(AMBIQT_COMMIT)
    server.files["/ambiqt/AmbiQT.zip"] = first
    spider = serve_spider(server)
    up = data_home / "upstream"
    assert run(capsys, "spider", "--url-base", server.base, "--sha256", sha(spider))[0] == 0
    assert run(capsys, "ambiqt", "--url-base", server.base, "--no-build")[0] == 0
    installed = (up / "ambiqt" / ".ambitab-download.json").read_bytes()

    changed = zipfile.ZipFile(io.BytesIO(first))
    entries = {i.filename: changed.read(i) for i in changed.infolist()}
    entries[f"AmbiQT-{AMBIQT_COMMIT}/README.md"] = b"changed upstream\n"
    server.files["/ambiqt/AmbiQT.zip"] = _zip_bytes(entries)
    status, out, err = run(capsys, "ambiqt", "--url-base", server.base, "--no-build", "--force")
    assert status == 1
    # the archive grew, so its size already differs from the recorded one
    assert f"{len(first)} are expected (recorded at the first download)" in err
    assert (up / "ambiqt" / ".ambitab-download.json").read_bytes() == installed
    assert leftovers(up) == []


def _zip_bytes(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@needs_samples
def test_a_checksum_mismatch_fails_clearly_and_installs_nothing(capsys, data_home, server):
    served = serve_spider(server)
    up = data_home / "upstream"
    wrong = "0" * 64
    status, out, err = run(capsys, "spider", "--url-base", server.base, "--sha256", wrong)
    assert status == 1
    assert f"expected SHA-256 {wrong} (given with --sha256), got {sha(served)}" in err
    assert not (up / "spider").exists()
    assert not (up / "checksums.json").exists()
    assert leftovers(up) == []
    # the pinned entry (the real Spider archive) refuses the fixture before reading it all
    status, out, err = run(capsys, "spider", "--url-base", server.base)
    assert status == 1
    assert "99736136 are expected (pinned in the download table)" in err
    assert not (up / "spider").exists()


@needs_samples
def test_a_truncated_transfer_installs_nothing_and_the_next_run_resumes(
    capsys, data_home, server, tmp_path, monkeypatch
):
    data = bird_dev_zip(tmp_path)
    server.files["/bird-dev/dev.zip"] = data
    cut = len(data) // 3
    server.truncate["/bird-dev/dev.zip"] = cut
    monkeypatch.setenv("AMBITAB_DOWNLOAD_URL_BASE", server.base)  # the mirror, by environment
    up = data_home / "upstream"

    status, out, err = run(capsys, "bird-dev", "--no-build")
    assert status == 1
    assert f"after {cut} of {len(data)} bytes" in err and "resume" in err
    assert not (up / "bird-dev").exists()
    part = up / ".downloads" / "bird-dev" / "dev.zip.part"
    assert part.read_bytes() == data[:cut]

    status, out, err = run(capsys, "bird-dev", "--no-build")
    assert status == 0, err
    second = server.requests("/bird-dev/dev.zip")[-1]
    assert second["range"] == f"bytes={cut}-"
    assert (second["status"], second["sent"]) == (206, len(data) - cut)
    assert f"resumed at byte {cut}" in err
    assert f"bird-dev: {len(data) / 1000:.1f} kB of {len(data) / 1000:.1f} kB (100%)" in err
    # the resumed bytes are exactly the served file
    assert json.loads((up / "checksums.json").read_text())["bird-dev"]["sha256"] == sha(data)
    assert (up / "bird-dev" / "dev.json").read_bytes() == (BIRD / "dev" / "dev.json").read_bytes()
    for entry in json.loads((BIRD / "dev" / "dev_tables.json").read_text()):
        db = entry["db_id"]
        assert (up / "bird-dev" / "dev_databases" / db / f"{db}.sqlite").is_file()
    assert not (up / "bird-dev" / "dev_databases.zip").exists()  # the nested zip is unpacked
    assert leftovers(up) == []


@needs_samples
def test_hub_files_are_verified_one_by_one(capsys, data_home, server):
    source = get_source("bird-interact").artifacts[0]
    listing, files = hub_tree(MINI_INTERACT)
    prefix = f"/mini-interact/datasets/{source.repo}/resolve/{source.revision}/"
    server.files[f"/mini-interact/api/datasets/{source.repo}/tree/{source.revision}"] = json.dumps(
        listing
    ).encode()
    server.content_types[f"/mini-interact/api/datasets/{source.repo}/tree/{source.revision}"] = (
        "application/json"
    )
    for name, data in files.items():
        server.files[prefix + name] = data
    up = data_home / "upstream"

    status, out, err = run(capsys, "bird-interact", "--url-base", server.base)
    assert status == 0, err
    assert "not built" in out and "--ground-truth" in out  # solutions are withheld upstream
    for name, data in files.items():
        assert (up / "mini-interact" / name).read_bytes() == data
    record = json.loads((up / "mini-interact" / ".ambitab-download.json").read_text())
    assert (record["checksum"], record["files"]) == ("hub", len(files))

    # a file that differs from the Hub's published digest fails and leaves the install alone
    original = files["alien/alien_kb.jsonl"]
    server.files[prefix + "alien/alien_kb.jsonl"] = original.replace(b"a", b"e", 1)  # same size
    status, out, err = run(capsys, "bird-interact", "--url-base", server.base, "--force")
    assert status == 1 and "checksum mismatch" in err and "alien_kb.jsonl" in err
    assert (up / "mini-interact" / "alien" / "alien_kb.jsonl").read_bytes() == files[
        "alien/alien_kb.jsonl"
    ]
    assert leftovers(up) == []

    # another revision than the pinned one is fetched on request, still checked file by file
    server.files[f"/mini-interact/api/datasets/{source.repo}/tree/main"] = json.dumps(
        listing
    ).encode()
    for name, data in files.items():
        server.files[f"/mini-interact/datasets/{source.repo}/resolve/main/{name}"] = data
    status, out, err = run(capsys, "bird-interact", "--url-base", server.base, "--revision", "main")
    assert status == 0, err
    record = json.loads((up / "mini-interact" / ".ambitab-download.json").read_text())
    assert record["revision"] == "main"
    assert (up / "mini-interact" / "mini_interact.jsonl").read_bytes() == files[
        "mini_interact.jsonl"
    ]


def test_bird_dev_and_train_build_one_ew_bird_corpus(capsys, data_home, server, tmp_path):
    server.files["/bird-dev/dev.zip"] = bird_zip("dev", tmp_path)
    server.files["/bird-train/train.zip"] = bird_zip("train", tmp_path)
    status, out, err = run(capsys, "bird-dev", "--url-base", server.base)
    assert status == 0, err
    assert load_corpus("ew_bird").splits == ["dev"]
    status, out, err = run(capsys, "bird-train", "--url-base", server.base, "--json")
    assert status == 0, err
    build = json.loads(out.strip().splitlines()[-1])["reports"][0]["build"]
    corpus = load_corpus("AmbiTab-EW-Bird-v0")  # built from both parts: train and dev
    assert sorted(corpus.splits) == ["dev", "train"] and len(corpus) == build["records"] == 3
    for name in corpus.manifest.databases:  # copied into the corpus, not links to a build folder
        path = corpus.database_file(name, "sqlite")
        assert path.is_file() and not path.is_symlink()
        assert corpus.path in path.resolve().parents


def test_released_records_need_birds_databases(capsys, data_home, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text('{"id": "x"}\n')
    status, out, err = run(capsys, "ambitab-bird")
    assert status == 2 and "no URL to pin yet" in err and "--llm-url" in err
    status, out, err = run(capsys, "ambitab-bird", "--file", str(records))
    assert status == 0, err
    assert "not built: BIRD's databases are not installed" in out
    installed = data_home / "upstream" / "ambitab-bird" / "records.jsonl"
    assert installed.read_bytes() == records.read_bytes()


def test_ambrosia_prints_the_steps_and_installs_the_given_file(capsys, data_home, tmp_path):
    status, out, err = run(capsys, "ambrosia")
    assert status == 2
    assert "ambrosia-benchmark.github.io" in err and "--file" in err
    assert not (data_home / "upstream" / "ambrosia").exists()

    csv_path = ambrosia_csv(tmp_path / "mine")
    status, out, err = run(capsys, "ambrosia", "--file", str(csv_path), "--json")
    assert status == 0, err
    result = json.loads(out.strip().splitlines()[-1])["reports"][0]
    installed = data_home / "upstream" / "ambrosia" / "ambrosia.csv"
    assert installed.read_bytes() == csv_path.read_bytes()
    assert result["artifacts"][0]["sha256"] == sha(csv_path.read_bytes())
    direct = build_corpus("ambrosia", BuildOptions(source=csv_path), out=tmp_path / "direct")
    assert direct.ok and result["build"]["records"] == direct.records > 0
    assert len(load_corpus("AmbiTab-Ambrosia-v0")) == direct.records


def test_taco_needs_consent_and_then_builds(capsys, data_home, server, tmp_path):
    data = taco_zip(tmp_path)
    server.files["/taco/taco.zip"] = data
    status, out, err = run(capsys, "taco", "--url-base", server.base)
    assert status == 2
    assert "no licence" in err and "--accept-unlicensed" in err
    assert server.log == []  # nothing was fetched without consent

    status, out, err = run(capsys, "taco", "--url-base", server.base, "--accept-unlicensed")
    assert status == 0, err
    assert (data_home / "upstream" / "taco" / "us" / "data" / "new_schema").is_dir()
    assert "built taco" in out
    assert len(load_corpus("taco")) > 0


def test_a_web_page_instead_of_the_archive_is_refused(capsys, data_home, server):
    server.files["/taco/taco.zip"] = b"<html>Google Drive can't scan this file</html>"
    server.content_types["/taco/taco.zip"] = "text/html; charset=utf-8"
    status, out, err = run(capsys, "taco", "--url-base", server.base, "--accept-unlicensed")
    assert status == 1 and "web page" in err and "--file" in err
    assert not (data_home / "upstream" / "taco").exists()


def test_an_archive_with_an_unsafe_path_installs_nothing(capsys, data_home, server, tmp_path):
    server.files["/taco/taco.zip"] = _zip_bytes({"us/data/x.json": b"{}", "../../evil": b"x"})
    status, out, err = run(capsys, "taco", "--url-base", server.base, "--accept-unlicensed")
    assert status == 1 and "unsafe path" in err
    assert not (data_home / "upstream" / "taco").exists()
    assert not any(p.name == "evil" for p in data_home.parent.rglob("evil"))


@needs_samples
def test_all_fetches_what_is_allowed_and_skips_the_rest(capsys, data_home, server, tmp_path):
    spider = serve_spider(server)
    server.files["/ambiqt/AmbiQT.zip"] = ambiqt_zip(AMBIQT_COMMIT)
    server.files["/bird-dev/dev.zip"] = bird_dev_zip(tmp_path)
    server.files["/bird-train/train.zip"] = bird_zip("train", tmp_path)
    server.truncate["/bird-train/train.zip"] = 100  # the first attempt is cut short
    source = get_source("bird-interact").artifacts[0]
    listing, files = hub_tree(MINI_INTERACT)
    server.files[f"/mini-interact/api/datasets/{source.repo}/tree/{source.revision}"] = json.dumps(
        listing
    ).encode()
    for name, data in files.items():
        server.files[f"/mini-interact/datasets/{source.repo}/resolve/{source.revision}/{name}"] = (
            data
        )
    server.files["/taco/taco.zip"] = taco_zip(tmp_path)
    assert run(capsys, "spider", "--url-base", server.base, "--sha256", sha(spider))[0] == 0
    up = data_home / "upstream"

    # a failing source does not stop the others
    status, out, err = run(capsys, "--all", "--url-base", server.base, "--no-build", "--json")
    assert status == 1
    result = json.loads(out.strip().splitlines()[-1])
    assert [r["source"] for r in result["reports"]] == [
        "ambiqt", "spider", "bird-dev", "bird-interact",
    ]  # fmt: skip
    assert [f["source"] for f in result["failed"]] == ["bird-train"]
    assert "after 100 of" in result["failed"][0]["error"]
    assert {s["source"] for s in result["skipped"]} == {"taco", "ambrosia", "ambitab-bird"}
    assert (
        "skipped taco" in err
        and "skipped ambrosia" in err
        and "ambitab-gym download: bird-train" in err
    )
    assert not server.requests("/taco/taco.zip")  # no consent, no request
    assert not (up / "bird-train").exists()

    # the next run resumes the failed one and leaves the installed ones alone
    status, out, err = run(capsys, "--all", "--url-base", server.base, "--no-build", "--json")
    assert status == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    checks = {a["name"]: a["checksum"] for r in result["reports"] for a in r["artifacts"]}
    assert checks == {
        "spider": "installed", "ambiqt": "installed", "bird-dev": "installed",
        "bird-train": "recorded", "mini-interact": "installed",
    }  # fmt: skip
    assert server.requests("/bird-train/train.zip")[-1]["range"] == "bytes=100-"
    for name in ("ambiqt", "spider", "bird-dev", "bird-train", "mini-interact"):
        assert (up / name / ".ambitab-download.json").is_file(), name
    assert (up / "bird-train" / "train_databases" / "shops" / "shops.sqlite").is_file()


def test_a_password_protected_archive_is_refused(capsys, data_home, tmp_path):
    data = bytearray(_zip_bytes({"ambrosia.csv": b"question\n"}))
    # set the "encrypted" flag bit as a password-protected zip has it (stdlib cannot encrypt)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + offset
        data[at] |= 0x1
    archive = tmp_path / "ambrosia.zip"
    archive.write_bytes(bytes(data))
    status, out, err = run(capsys, "ambrosia", "--file", str(archive))
    assert status == 1 and "password-protected" in err and "--file" in err
    assert not (data_home / "upstream" / "ambrosia").exists()


@needs_samples
def test_progress_lines_where_no_bar_is_drawn(data_home, server):
    served = serve_spider(server)
    lines: list[str] = []
    options = DownloadOptions(
        url_base=server.base, sha256=sha(served), build=False, progress_every=0.0
    )
    download("spider", options, notify=lines.append)
    progress = [line for line in lines if line.startswith("spider: ") and line.endswith("%)")]
    assert len(progress) >= 2
    done = [float(line.split()[1]) for line in progress]
    assert done == sorted(done)
    assert progress[-1].endswith("(100%)") and f"{len(served) / 1000:.1f} kB of" in progress[-1]


def test_a_server_that_ignores_range_is_read_from_the_start(tmp_path, server):
    data = bytes(range(256)) * 64
    server.files["/f.bin"] = data
    server.ignore_range.add("/f.bin")
    (tmp_path / "f.bin.part").write_bytes(b"garbage!")
    with http_client() as client:
        result = fetch(f"{server.base}/f.bin", tmp_path / "f.bin", client=client, sha256=sha(data))
    assert server.log[-1]["range"] == "bytes=8-" and server.log[-1]["status"] == 200
    assert result.resumed_from == 0
    assert (tmp_path / "f.bin").read_bytes() == data
    assert not (tmp_path / "f.bin.part").exists()


def test_a_complete_partial_file_is_verified_not_fetched_again(tmp_path, server):
    data = b"complete" * 100
    server.files["/g.bin"] = data
    (tmp_path / "g.bin.part").write_bytes(data)
    with http_client() as client:
        result = fetch(f"{server.base}/g.bin", tmp_path / "g.bin", client=client, sha256=sha(data))
    assert server.log[-1]["status"] == 416 and server.log[-1]["sent"] == 0
    assert result.sha256 == sha(data) and (tmp_path / "g.bin").read_bytes() == data


def test_an_unreachable_server_names_the_url(tmp_path):
    with http_client(timeout=5) as client, pytest.raises(DownloadError, match="127.0.0.1:9"):
        fetch("http://127.0.0.1:9/x.zip", tmp_path / "x.zip", client=client)


def test_a_failed_download_prints_json_and_the_offline_ways_in(capsys, data_home):
    import socket

    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{probe.getsockname()[1]}"
    status, out, err = run(capsys, "bird-dev", "--url-base", base, "--json", "--timeout", "5")
    assert status == 1
    result = json.loads(out.strip().splitlines()[-1])
    assert result["reports"] == [] and result["skipped"] == []
    (failed,) = result["failed"]
    assert failed["source"] == "bird-dev"
    assert f"cannot download {base}/bird-dev/dev.zip" in failed["error"]
    pinned = get_source("bird-dev").artifacts[0].url
    assert failed["hint"] == (
        f"offline or blocked? fetch {pinned} elsewhere and install it with `ambitab-gym "
        "download bird-dev --file PATH`, or fetch from a mirror with --url-base URL (or "
        "$AMBITAB_DOWNLOAD_URL_BASE); see docs/data.md"
    )
    assert err.splitlines()[-2:] == [
        f"ambitab-gym download: bird-dev: {failed['error']}",
        f"  {failed['hint']}",
    ]
    # a source whose prerequisite failed names the prerequisite's own command
    status, out, err = run(capsys, "ambiqt", "--url-base", base, "--json", "--timeout", "5")
    hint = json.loads(out.strip().splitlines()[-1])["failed"][0]["hint"]
    assert (
        "`ambitab-gym download spider --file PATH`, then rerun `ambitab-gym download ambiqt`"
        in hint
    )
    # a manual step is a JSON line too (exit status 2)
    status, out, err = run(capsys, "ambrosia", "--json")
    assert status == 2
    assert json.loads(out.strip().splitlines()[-1])["skipped"][0]["source"] == "ambrosia"
