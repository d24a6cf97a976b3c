"""The floor under `memfile search` as a process: Whoosh alone, with no memfile, no click and no stat check.

    python benchmarks/bare_whoosh.py build INDEX_FOLDER MIND_FOLDER   # index every *.md body (stock analyzer)
    python benchmarks/bare_whoosh.py search INDEX_FOLDER WORD...      # print the paths of the 10 best
    python benchmarks/bare_whoosh.py --smoke                          # build and search 3 files in a temp folder

`bench_index.py` times `search` as a fresh process next to `rg` and `memfile search`, on the
same vault and words: what any program that answers from a Whoosh index in a new Python process
pays at least (start Python, import Whoosh, open the index, search, print). The search imports
only `whoosh.index` and `whoosh.query` (the searcher loads what it needs); it skips the query
parser by making an OR of the analysed words itself.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path


def build(index_folder: Path, mind_folder: Path) -> int:
    from whoosh import fields, index

    schema = fields.Schema(path=fields.ID(stored=True, unique=True), content=fields.TEXT())
    index_folder.mkdir(parents=True, exist_ok=True)
    ix = index.create_in(str(index_folder), schema)
    writer = ix.writer()
    count = 0
    for path in sorted(mind_folder.rglob("*.md")):
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        body = text.split("\n---\n", 1)[-1] if text.startswith("---") else text
        writer.add_document(path=str(path.relative_to(mind_folder)), content=body)
        count += 1
    writer.commit()
    return count


def search(index_folder: Path, words: list[str]) -> list[str]:
    from whoosh import index
    from whoosh.query import Or, Term

    ix = index.open_dir(str(index_folder))
    analyzer = ix.schema["content"].analyzer
    terms = [Term("content", token.text) for word in words for token in analyzer(word)]
    with ix.searcher() as searcher:
        return [hit["path"] for hit in searcher.search(Or(terms), limit=10)]


def smoke() -> int:
    """Build an index of three memories in a temp folder and search it: 0 when the right one is found."""
    work = Path(tempfile.mkdtemp(prefix="bare-whoosh-smoke-"))
    try:
        mind = work / "mind"
        for name, body in (("a", "the billing service"), ("b", "deployment pipeline notes"), ("c", "lunch")):
            (mind / "note").mkdir(parents=True, exist_ok=True)
            (mind / "note" / f"{name}.md").write_text(f"---\nkey: {name}\n---\n{body}\n", encoding="utf-8")
        count = build(work / "index", mind)
        found = search(work / "index", ["pipeline"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"smoke: indexed {count} files, found {found}")
    return 0 if count == 3 and found == ["note/b.md"] else 1


def main(argv: list[str]) -> int:
    if argv == ["--smoke"]:
        return smoke()
    if len(argv) >= 3 and argv[0] == "build":
        print(f"indexed {build(Path(argv[1]), Path(argv[2]))} files")
        return 0
    if len(argv) >= 3 and argv[0] == "search":
        print("\n".join(search(Path(argv[1]), argv[2:])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
