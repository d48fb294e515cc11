"""The cost of a campaign's corpus identity: the corpus checksum cold (every file read) and
cached (files unchanged: one ``stat`` each), side by side, on a built corpus whose database
file weighs ``--mb`` MiB (a BIRD-sized SQLite file is hundreds of MiB).

Prints seconds per checksum and the cold/cached ratio; the last line is JSON.

    python benchmarks/corpus_checksum.py [--mb 256] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="size of the database file, MiB")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ambitab-bench-home-"))
    os.environ["AMBITAB_HOME"] = str(home)
    from ambitab_gym.corpora import BUNDLED_DIR, load_corpus
    from ambitab_gym.corpora.home import built_corpora_dir
    from ambitab_gym.evaluation.identity import CHECKSUM_CACHE, corpus_checksum

    try:
        folder = built_corpora_dir() / "bird"
        shutil.copytree(BUNDLED_DIR / "bird", folder)
        corpus = load_corpus("bird")
        name, entry = sorted(corpus.manifest.databases.items())[0]
        block = os.urandom(1 << 20)
        with (folder / entry.file).open("ab") as handle:  # a big database file, hashed only
            for _ in range(args.mb):
                handle.write(block)
        cache = home / "cache" / CHECKSUM_CACHE
        cold, warm = [], []
        for _ in range(args.repeats):
            cache.unlink(missing_ok=True)
            start = time.perf_counter()
            first = corpus_checksum(corpus)
            cold.append(time.perf_counter() - start)
            start = time.perf_counter()
            again = corpus_checksum(corpus)
            warm.append(time.perf_counter() - start)
            assert first == again
        best_cold, best_warm = min(cold), min(warm)
        print(f"database file {args.mb} MiB ({name}), best of {args.repeats}")
        print(f"cold checksum:   {best_cold:.4f} s")
        print(f"cached checksum: {best_warm:.6f} s")
        print(f"ratio cold/cached: {best_cold / best_warm:.0f}x")
        print(json.dumps({"mb": args.mb, "cold_s": best_cold, "cached_s": best_warm,
                          "ratio": best_cold / best_warm}))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
