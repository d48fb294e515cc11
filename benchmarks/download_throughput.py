"""Download throughput: ``ambitab_gym.download.fetch`` against a bare httpx transfer.

Serves one random file from a stdlib HTTP server on 127.0.0.1 (a thread of this process) and
times, side by side in this one run (best of ``--repeat``):

* ``bare``: ``httpx`` streaming the file into memory and discarding it (the transport alone);
* ``fetch``: :func:`~ambitab_gym.download.fetch` writing ``.part``, hashing SHA-256, checking
  the size and checksum, renaming;
* ``resume``: the same with half of the file already in ``.part`` (the prefix is re-hashed,
  the rest comes with a ``Range`` request).

    python benchmarks/download_throughput.py [--mb 64] [--repeat 3]

Last line (JSON): mb, bare_s, fetch_s, resume_s, fetch_mb_per_s, fetch_over_bare,
resume_over_fetch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from download_fixtures import MirrorServer  # noqa: E402

from ambitab_gym.download.fetch import fetch, http_client, sha256_of  # noqa: E402


def best(repeat: int, step, setup=None) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = os.urandom(args.mb << 20)
    with MirrorServer() as server, tempfile.TemporaryDirectory() as folder:
        server.files["/f.bin"] = data
        url = f"{server.base}/f.bin"
        source = Path(folder) / "source.bin"
        source.write_bytes(data)
        digest = sha256_of(source)
        dest = Path(folder) / "f.bin"

        def bare() -> None:
            with httpx.Client() as client, client.stream("GET", url) as response:
                for _chunk in response.iter_bytes():
                    pass

        def clean() -> None:
            dest.unlink(missing_ok=True)

        def half() -> None:  # not timed: the partial file a cut transfer left
            dest.unlink(missing_ok=True)
            (Path(folder) / "f.bin.part").write_bytes(data[: len(data) // 2])

        def full() -> None:
            with http_client() as client:
                fetch(url, dest, client=client, sha256=digest)

        def resume() -> None:
            with http_client() as client:
                result = fetch(url, dest, client=client, sha256=digest)
            assert result.resumed_from == len(data) // 2

        bare_s = best(args.repeat, bare)
        fetch_s = best(args.repeat, full, clean)
        resume_s = best(args.repeat, resume, half)
    result = {
        "mb": args.mb,
        "bare_s": round(bare_s, 3),
        "fetch_s": round(fetch_s, 3),
        "resume_s": round(resume_s, 3),
        "fetch_mb_per_s": round(args.mb / fetch_s, 1),
        "fetch_over_bare": round(fetch_s / bare_s, 2),
        "resume_over_fetch": round(resume_s / fetch_s, 2),
    }
    print(
        f"{args.mb} MB on 127.0.0.1: bare httpx {bare_s:.2f} s, fetch {fetch_s:.2f} s "
        f"({result['fetch_mb_per_s']} MB/s, x{result['fetch_over_bare']} of bare), resume from "
        f"half {resume_s:.2f} s (x{result['resume_over_fetch']} of a full fetch)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
