"""Writing Whoosh segments for less CPU: speed tricks that write Whoosh's own files, byte for byte.

- `WriteCodec` (switch `codec`): a new segment's lengths read once, not once per posting.
- `TermBlocks` (switch `term_blocks`, the field writer of `WriteCodec`): a term's postings
  written a block at a time, not a posting at a time.
- `TermWriter` / `TermMpWriter` (switch `term_pool`, made by `open_writer`): a writer whose pool
  keeps its postings by term as the documents come, so that a commit sorts terms, not postings.

Whoosh is not patched: memfile's writer is made by `open_writer` with `store._bulk_options`'s
options, its codec included, and Whoosh's writer processes get both. tests/test_write_codec.py
compares every file written with stock Whoosh's.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from operator import itemgetter, sub
from pickle import dumps
from typing import Any

from whoosh.codec.base import OutOfOrderError
from whoosh.codec.whoosh3 import (
    COMPRESSION_MIN_SIZE,
    LENGTHS_COLUMN,
    WHOOSH3_HEADER_MAGIC,
    W3Codec,
    W3FieldWriter,
    W3PerDocReader,
    W3TermInfo,
    _lenfield,
)
from whoosh.multiproc import MpWriter, SubWriterTask, finish_subsegment
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import PostingPool, SegmentWriter

from ..config import plain

#: One term's postings, in document order: (term bytes, documents, weights, encoded values).
Term = tuple[bytes, tuple[int, ...], tuple[Any, ...], tuple[Any, ...]]


class WriteCodec(W3Codec):
    """Whoosh's codec for writing segments: a new segment's postings look up each field's
    lengths in a list read once, not on disk once per posting (a tenth of the indexing processes' CPU),
    and its field writer is `TermBlocks`.

    Whoosh reads the length of every posting's document as it writes the postings
    (for the blocks' length bounds), through a seek and a read each. The files
    written are the same, byte for byte (tested), and a segment names Whoosh's own
    codec, so an index never refers to this class. A writer hands its codec to its
    writer processes (`procs`), so the tricks reach them too.
    """

    def new_segment(self, storage: Any, indexname: str) -> Any:
        return W3Codec(self._blocklimit, self._compression, self._inlinelimit).new_segment(storage, indexname)

    def per_document_reader(self, storage: Any, segment: Any) -> Any:
        return _LengthsAtOnce(storage, segment)

    def field_writer(self, storage: Any, segment: Any) -> Any:
        if plain("term_blocks") or self._inlinelimit > 1:  # inlined postings go Whoosh's way
            return W3FieldWriter(self, storage, segment)
        return TermBlocks(self, storage, segment)


class _LengthsAtOnce(W3PerDocReader):
    def doc_field_length_reader(self, fieldname: str, default: int = 0) -> Any:
        lengths = self.field_lengths(fieldname)
        if lengths is None:
            return super().doc_field_length_reader(fieldname, default)
        return lengths.__getitem__

    def field_lengths(self, fieldname: str) -> list[int | None] | None:
        """Every document's length of the field (None for a zero byte, as Whoosh reads it), or None
        when the segment has no lengths for the field."""
        reader = self._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN)
        if reader is None:
            return None
        lengths = [None] + [byte_to_length(code) for code in range(1, 256)]  # a zero byte reads as None, as in Whoosh
        return [lengths[code] for code in reader.load()]


class TermBlocks(W3FieldWriter):
    """Whoosh's field writer, writing each term's postings a block at a time.

    Whoosh's `add_postings` makes several Python calls per posting (the order checks,
    the length lookup, the posting writer's `add_posting` with its type asserts and
    bounds). This one takes a term's postings at once and works out each block's
    bounds with C-level calls (min, max, filter, array). What it writes and in which
    order is Whoosh's (`W3PostingsWriter`, `W3TermInfo.to_bytes`), so the files are
    the same, byte for byte.
    """

    def add_postings(self, schema: Any, lengths: Any, items: Iterable[tuple[str, bytes, int, Any, Any]]) -> None:
        self.add_terms(schema, lengths, _by_term(items))

    def add_terms(self, schema: Any, lengths: Any, fields: Iterable[tuple[str, Iterable[Term]]]) -> None:
        """Write the postings of every term, field by field, both in Whoosh's order (sorted)."""
        for fieldname, terms in fields:
            field = schema[fieldname]
            self.start_field(fieldname, field)
            field_lengths, fixed = _field_lengths(lengths, fieldname), field.format.fixed_value_size()
            for btext, ids, weights, values in terms:
                if ids[0] == -1:  # words for a spelling graph, not postings (Whoosh's add_postings skips them)
                    kept = [i for i, docnum in enumerate(ids) if docnum != -1]
                    if not kept:
                        continue
                    ids, weights, values = (tuple(column[i] for i in kept) for column in (ids, weights, values))
                self._write_term(btext, ids, weights, values, field_lengths, fixed)
            self.finish_field()

    def _write_term(
        self,
        btext: bytes,
        ids: tuple[int, ...],
        weights: tuple[Any, ...],
        values: tuple[Any, ...],
        lengths: Callable[[tuple[int, ...]], Iterable[Any]],
        fixed: int | None,
    ) -> None:
        """One term's postings in blocks, then its row in the terms table: W3PostingsWriter's
        `add_posting`, `_write_block` and `finish_postings`, and W3FieldWriter's `finish_term`.
        `lengths` gives the field's lengths of documents, `fixed` is the size of the format's values."""
        postfile = self._postfile
        start = postfile.tell()
        limit, compression = self._codec._blocklimit, self._codec._compression
        count = len(ids)
        parts = [WHOOSH3_HEADER_MAGIC]
        weight: Any = 0
        minlength: Any = None
        maxlength: Any = 0
        maxweight: Any = 0
        for begin in range(0, count, limit):
            end = begin + limit
            block_ids = ids[begin:end]
            block_weights = weights[begin:end]
            floats = array("f", block_weights)  # what Whoosh keeps of a weight
            known = list(filter(None, lengths(block_ids)))  # a posting's length counts only when truthy
            block_min = min(known) if known else None
            block_max = max(known) if known else 0
            block_maxweight = max(block_weights)
            if not block_maxweight > 0:  # Whoosh's bound starts at 0 and only a greater weight replaces it
                block_maxweight = _max_weight(block_weights)
            if fixed is None or fixed < 0:
                mini_values: Any = tuple(filter(None, values[begin:end]))  # an empty value is not kept
            elif fixed == 0:
                mini_values = None
            else:
                mini_values = b"".join(filter(None, values[begin:end]))
            data = dumps((tuple(map(sub, block_ids, (0, *block_ids[:-1]))), _mini(floats), mini_values), 2)
            level = compression if len(data) >= COMPRESSION_MIN_SIZE else 0
            if level:
                data = zlib.compress(data, level)
            info = dumps(
                (
                    len(block_ids),
                    block_ids[-1],
                    block_maxweight,
                    level,
                    length_to_byte(block_min),
                    length_to_byte(block_max),
                ),
                2,
            )
            blocklength = len(info) + len(data)
            parts += (pack_int(-blocklength if end >= count else blocklength), info, data)
            # W3TermInfo.add_block
            weight += sum(floats)
            minlength = block_min if minlength is None else min(minlength, block_min)
            maxlength = max(maxlength, block_max)
            maxweight = max(maxweight, block_maxweight)
        written = b"".join(parts)
        postfile.write(written)
        row = W3TermInfo._struct.pack(
            False,
            weight,
            count,
            0 if minlength is None else length_to_byte(minlength),
            length_to_byte(maxlength),
            maxweight,
            ids[0],
            ids[-1],
        )
        self._tindex.add(pack_ushort(self._fieldid) + btext, row + pack_long(start) + pack_int(len(written)))


class TermPool(PostingPool):
    """Whoosh's posting pool, holding its postings by field and term as they come: one list per
    term, (document, weight, value) after (document, weight, value), not a tuple per posting.

    Whoosh's pool adds every posting through a call that asserts its types and counts its bytes,
    and sorts all postings (a tuple each) at the commit, some 700,000 for 10,000 memories. Here a
    document's field adds its postings in one call (`add_field`) and the commit sorts only the
    terms: a term's documents come in order already. Past its memory limit the pool writes its
    postings out in Whoosh's own runs (`save`), and it reads them back the same way, so Whoosh's
    writer processes and merges take it as their own.
    """

    def __init__(self, tempstore: Any, segment: Any, limitmb: float = 128, **kwargs: Any) -> None:
        super().__init__(tempstore, segment, limitmb=limitmb, **kwargs)
        self.terms: dict[str, dict[bytes, list[Any]]] = {}
        self.unsorted: set[tuple[str, bytes]] = set()  # terms with a document out of order: sorted as Whoosh would

    def add_field(self, fieldname: str, docnum: int, items: Iterable[Any], boost: float, scorable: bool) -> int:
        """Add one field's postings of document `docnum`, from Whoosh's `field.index` (term bytes,
        frequency, weight, value), as SegmentWriter.add_document does; returns the field's length."""
        terms = self.terms.get(fieldname)
        if terms is None:
            terms = self.terms[fieldname] = {}
            self.fieldnames.add(fieldname)
        length = count = 0
        for tbytes, freq, weight, vbytes in items:
            if scorable:
                length += freq
            found = terms.get(tbytes)
            if found is None:
                terms[tbytes] = [docnum, weight * boost, vbytes]
            else:
                if found[-3] >= docnum:
                    self.unsorted.add((fieldname, tbytes))
                found += (docnum, weight * boost, vbytes)
            count += 1
        self._grew(count)
        return length

    def add(self, item: tuple[str, bytes, int, Any, Any]) -> None:
        """One posting, as Whoosh's pool takes it (merged segments, and what goes Whoosh's way)."""
        fieldname, tbytes, docnum, weight, vbytes = item
        assert isinstance(tbytes, bytes), f"tbytes={tbytes!r}"
        assert vbytes is None or isinstance(vbytes, bytes), f"vbytes={vbytes!r}"
        terms = self.terms.get(fieldname)
        if terms is None:
            terms = self.terms[fieldname] = {}
            self.fieldnames.add(fieldname)
        found = terms.get(tbytes)
        if found is None:
            terms[tbytes] = [docnum, weight, vbytes]
        else:
            if found[-3] >= docnum:
                self.unsorted.add((fieldname, tbytes))
            found += (docnum, weight, vbytes)
        self._grew(1)

    def _grew(self, count: int) -> None:
        self.currentsize += count * POSTING_BYTES
        if self.currentsize > self.limit:
            self.save()

    def fields(self) -> Iterator[tuple[str, Iterator[Term]]]:
        """Every term's postings, field by field, in Whoosh's order (see `TermBlocks.add_terms`)."""
        for fieldname in sorted(self.terms):
            yield fieldname, self._field_terms(fieldname)

    def _field_terms(self, fieldname: str) -> Iterator[Term]:
        terms, unsorted = self.terms[fieldname], self.unsorted
        for btext in sorted(terms):
            flat = terms[btext]
            if unsorted and (fieldname, btext) in unsorted:
                flat = [part for posting in sorted(zip(flat[0::3], flat[1::3], flat[2::3])) for part in posting]
            yield btext, tuple(flat[0::3]), tuple(flat[1::3]), tuple(flat[2::3])

    def _postings(self) -> Iterator[tuple[str, bytes, int, Any, Any]]:
        """The postings held, as Whoosh's pool sorts them."""
        for fieldname, terms in self.fields():
            for btext, ids, weights, values in terms:
                for docnum, weight, vbytes in zip(ids, weights, values):
                    yield fieldname, btext, docnum, weight, vbytes

    def save(self) -> None:
        """Write the postings held out as one of Whoosh's runs (sorted, a pickle each), a posting at a time."""
        if self.terms:
            path, f = self._new_run()
            self._write_run(f, self._postings())
            self._add_run(path)
            self.terms, self.unsorted = {}, set()
        self.currentsize = 0

    def items(self, maxfiles: int = 128) -> Any:
        if not self.runs:
            return self._postings()
        self.save()
        return super().items(maxfiles)


#: What a posting costs `TermPool` in memory, for its limit: about 70 bytes for memfile's documents
#: (three list slots, a float, the list's spare room; most values are shared), where Whoosh's pool
#: takes about 170 (a tuple, a float and the term's bytes of its own). Measured with tracemalloc.
POSTING_BYTES = 70


class TermWriter(SegmentWriter):
    """Whoosh's segment writer with a `TermPool`: a document's fields hand it their postings
    a field at a time, and its commit writes them by term (`TermBlocks.add_terms`) when they are
    all in memory. Whoosh's way for what memfile's schema never has (spelling words, vectors)."""

    def __init__(self, ix: Any, limitmb: float = 128, **kwargs: Any) -> None:
        super().__init__(ix, limitmb=limitmb, **kwargs)
        self.pool = self._terms = TermPool(self._tempstorage, self.newsegment, limitmb=limitmb)
        self._whooshs_way = False

    def add_document(self, **fields: Any) -> None:
        """SegmentWriter.add_document, but each field's postings go to the pool in one call."""
        if not self._added:  # Whoosh changes no field once a document is in
            self._whooshs_way = _spells_or_vectors(self.schema)
        if self._whooshs_way:
            return super().add_document(**fields)
        self._check_state()
        perdocwriter, schema, docnum, pool = self.perdocwriter, self.schema, self.docnum, self._terms
        docboost = self._doc_boost(fields)
        fieldnames = sorted([name for name in fields if not name.startswith("_")])
        self._check_fields(schema, fieldnames)
        perdocwriter.start_doc(docnum)
        try:
            for fieldname in fieldnames:
                value = fields.get(fieldname)
                if value is None:
                    continue
                field = schema[fieldname]
                length = 0
                if field.indexed:
                    boost = self._field_boost(fields, fieldname, docboost)
                    length = pool.add_field(fieldname, docnum, field.index(value), boost, field.scorable)
                customval = fields.get(f"_stored_{fieldname}", value)
                perdocwriter.add_field(fieldname, field, customval if field.stored else None, length)
                column = field.column_type
                if column and customval is not None:
                    perdocwriter.add_column_value(fieldname, column, field.to_column_value(customval))
        except ValueError:
            perdocwriter.cancel_doc()
            raise
        perdocwriter.finish_doc()
        self._added = True
        self.docnum += 1
        return None

    def _flush_segment(self) -> None:
        fieldwriter = self.fieldwriter
        if self._terms.runs or not isinstance(fieldwriter, TermBlocks):
            return super()._flush_segment()
        self.perdocwriter.close()
        lengths = self.per_document_reader() if self.codec.length_stats else None
        fieldwriter.add_terms(self.schema, lengths, self._terms.fields())
        fieldwriter.close()
        if lengths:
            lengths.close()
        return None


def _spells_or_vectors(schema: Any) -> bool:
    """Whether a field of the schema adds words for spelling or term vectors (TermWriter leaves them to Whoosh)."""
    fields = [field for _, field in schema.items()] + [field for _, field in schema._dyn_fields.values()]
    return any(field.vector or field.separate_spelling() for field in fields)


class TermMpWriter(MpWriter):
    """Whoosh's writer for several processes, whose processes write with a `TermWriter`."""

    def _new_task(self) -> Any:
        if self.start_method is not None:  # a target Whoosh's other start methods can import
            return super()._new_task()
        args = (self.storage, self.indexname, self.jobqueue, self.resultqueue, self.subargs, self.multisegment)
        task = _TermTask(*args)
        self.tasks.append(task)
        task.start()
        return task


class _TermTask(SubWriterTask):
    def run(self) -> None:
        """SubWriterTask.run, with a TermWriter."""
        ix = self.storage.open_index(self.indexname)
        writer = self.writer = TermWriter(ix, _lk=False, **self.kwargs)
        while self.running:
            jobinfo = self.jobqueue.get()
            if jobinfo is None:
                break
            self._process_file(*jobinfo)
        if not self.running:
            writer.cancel()
            return
        if self.multisegment:
            result = (None, writer.pool.fieldnames, writer._finalize_segment())
        else:
            result = finish_subsegment(writer, self.kwargs.get("k", 64))
        self.resultqueue.put(result, timeout=5)


def open_writer(ix: Any, procs: int = 1, lock: bool = True, **options: Any) -> Any:
    """`ix.writer(procs=procs, **options)`, with memfile's `TermWriter` or `TermMpWriter` unless
    MEMFILE_PLAIN names `term_pool`. `lock=False`: the caller holds Whoosh's writer lock, so the writer
    takes none (Whoosh's `_lk=False`, which its processes' writers pass themselves: they get `subargs`)."""
    taken: dict[str, Any] = {} if lock else {"_lk": False}
    if procs > 1 and not lock:
        taken["subargs"] = {k: v for k, v in options.items() if k not in ("batchsize", "multisegment", "subargs")}
    if plain("term_pool"):
        return ix.writer(procs=procs, **taken, **options)
    if procs <= 1:
        return TermWriter(ix, **taken, **options)
    if not getattr(ix.storage, "supports_multiproc_writing", False):
        return ix.writer(procs=procs, **taken, **options)  # Whoosh warns, and writes in this process
    return TermMpWriter(ix, procs=procs, **taken, **options)


_FIELD, _TEXT = itemgetter(0), itemgetter(1)


def _by_term(items: Iterable[tuple[str, bytes, int, Any, Any]]) -> Iterator[tuple[str, Iterator[Term]]]:
    """Whoosh's sorted postings, (field name, term bytes, document, weight, value), as
    `TermBlocks.add_terms` takes them, checked for order as Whoosh's `add_postings` does."""
    lastfn: str | None = None
    for fieldname, postings in groupby(items, _FIELD):
        if lastfn is not None and fieldname < lastfn:
            raise OutOfOrderError(f"Field {lastfn!r} .. {fieldname!r}")
        lastfn = fieldname
        yield fieldname, _terms(fieldname, postings)


def _terms(fieldname: str, postings: Iterable[tuple[str, bytes, int, Any, Any]]) -> Iterator[Term]:
    lasttext: bytes | None = None
    for btext, group in groupby(postings, _TEXT):
        if lasttext and btext < lasttext:
            raise OutOfOrderError(f"Term {fieldname}:{lasttext!r} .. {fieldname}:{btext!r}")
        _, _, ids, weights, values = zip(*group)
        yield btext, ids, weights, values
        lasttext = btext


def _field_lengths(lengths: Any, fieldname: str) -> Callable[[tuple[int, ...]], Iterable[Any]]:
    """The lengths of the field for a block's documents, as Whoosh's `add_postings` reads them."""
    if not lengths:
        return _no_lengths
    if isinstance(lengths, _LengthsAtOnce):
        found = lengths.field_lengths(fieldname)
        if found is None:
            return _no_lengths
        return lambda ids: map(found.__getitem__, ids)
    reader = getattr(lengths, "doc_field_length_reader", None)
    if reader is None:
        return lambda ids: (lengths.doc_field_length(docnum, fieldname) for docnum in ids)
    per_document = reader(fieldname)
    return lambda ids: map(per_document, ids)


def _no_lengths(ids: tuple[int, ...]) -> tuple[()]:
    return ()


def _max_weight(weights: tuple[Any, ...]) -> Any:
    """W3PostingsWriter's block bound, the slow way: 0, replaced by any greater weight (NaN never is)."""
    bound: Any = 0
    for weight in weights:
        if weight > bound:
            bound = weight
    return bound


def _mini(floats: array[float]) -> Any:
    """W3PostingsWriter._mini_weights: None when every weight is 1, the one weight when all are equal."""
    if floats.count(1.0) == len(floats):
        return None
    if floats.count(floats[0]) == len(floats):
        return floats[0]
    return tuple(floats)
