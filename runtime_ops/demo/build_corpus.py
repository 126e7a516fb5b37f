"""Generate the demo corpus from documentation every Python install carries.

    python -m runtime_ops.demo.build_corpus OUTDIR

Each document is the reference text of one or more standard-library modules (module docstring, then
the signature and docstring of its main functions and classes, as pydoc shows them), trimmed to about
12 KB and written in a mix of formats (.md, .txt, .html, .json, .jsonl, .pdf) under OUTDIR/stdlib/.
Real prose in several formats exercises every parser and gives retrieval something meaningful to rank.

The output is deterministic for a given Python minor version (memory addresses and install paths are
scrubbed), so regenerating on the same interpreter produces no diff. OUTDIR/stdlib/ is owned by this
script and replaced wholesale; nothing else in OUTDIR is touched.
"""

from __future__ import annotations

import argparse
import html
import importlib
import inspect
import json
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from runtime_ops.demo.pdf import minimal_pdf

MAX_MODULE_CHARS = 12_000  # per module, so the whole corpus stays well under 1.5 MB
MAX_OVERVIEW_CHARS = 5_000
MAX_FUNCTION_CHARS = 2_000
MAX_CLASS_DOC_CHARS = 1_200
MAX_CLASS_CHARS = 4_000
MAX_METHOD_CHARS = 300
SOURCE = f"Python {sys.version_info.major}.{sys.version_info.minor} standard library (pydoc)"


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    title: str  # hand-written, because many first docstring lines are half a sentence
    priority: tuple[str, ...] = ()  # documented first, so the trimming never drops the essentials


@dataclass(frozen=True)
class CorpusFile:
    key: str
    modules: tuple[ModuleSpec, ...]


def _m(name: str, title: str, priority: str = "") -> ModuleSpec:
    return ModuleSpec(name, title, tuple(priority.split()))


def _f(key: str, *modules: ModuleSpec) -> CorpusFile:
    return CorpusFile(key, modules)


CORPUS: tuple[CorpusFile, ...] = (
    # data formats and persistence
    _f(
        "stdlib/data/json.md",
        _m("json", "json — JSON encoder and decoder", "dumps dump loads load JSONEncoder JSONDecoder JSONDecodeError"),
    ),
    _f(
        "stdlib/data/csv.txt",
        _m("csv", "csv — CSV file reading and writing", "reader writer DictReader DictWriter Sniffer register_dialect"),
    ),
    _f(
        "stdlib/data/pickle.html",
        _m("pickle", "pickle — Python object serialization", "dumps loads dump load Pickler Unpickler"),
    ),
    _f(
        "stdlib/data/sqlite3.md",
        _m("sqlite3", "sqlite3 — DB-API 2.0 interface for SQLite databases", "connect Connection Cursor Row"),
    ),
    _f(
        "stdlib/data/binary.jsonl",
        _m(
            "base64",
            "base64 — Base16, Base32, Base64, Base85 data encodings",
            "b64encode b64decode urlsafe_b64encode urlsafe_b64decode b32encode b16encode",
        ),
        _m("struct", "struct — Interpret bytes as packed binary data", "pack unpack calcsize Struct"),
        _m("array", "array — Efficient arrays of numeric values", "array"),
    ),
    _f("stdlib/data/copy.txt", _m("copy", "copy — Shallow and deep copy operations", "copy deepcopy")),
    _f(
        "stdlib/data/uuid.json", _m("uuid", "uuid — UUID objects according to RFC 4122", "uuid4 uuid5 uuid1 uuid3 UUID")
    ),
    # files and archives
    _f("stdlib/files/pathlib.html", _m("pathlib", "pathlib — Object-oriented filesystem paths", "Path PurePath")),
    _f(
        "stdlib/files/shutil.txt",
        _m(
            "shutil",
            "shutil — High-level file operations",
            "copyfile copy2 copytree rmtree move which disk_usage make_archive",
        ),
    ),
    _f(
        "stdlib/files/tempfile.md",
        _m(
            "tempfile",
            "tempfile — Generate temporary files and directories",
            "TemporaryDirectory NamedTemporaryFile TemporaryFile mkstemp mkdtemp gettempdir",
        ),
    ),
    _f(
        "stdlib/files/io.txt",
        _m("io", "io — Core tools for working with streams", "open StringIO BytesIO TextIOWrapper"),
    ),
    _f(
        "stdlib/files/patterns.json",
        _m("glob", "glob — Unix style pathname pattern expansion", "glob iglob escape"),
        _m("fnmatch", "fnmatch — Unix filename pattern matching", "fnmatch fnmatchcase filter translate"),
    ),
    _f("stdlib/files/zipfile.html", _m("zipfile", "zipfile — Work with ZIP archives", "ZipFile is_zipfile")),
    _f("stdlib/files/gzip.md", _m("gzip", "gzip — Support for gzip files", "open compress decompress GzipFile")),
    # text processing
    _f(
        "stdlib/text/re.md",
        _m(
            "re",
            "re — Regular expression operations",
            "compile search match fullmatch sub findall finditer split escape",
        ),
    ),
    _f(
        "stdlib/text/textwrap.txt",
        _m("textwrap", "textwrap — Text wrapping and filling", "wrap fill dedent indent shorten"),
    ),
    _f(
        "stdlib/text/difflib.html",
        _m(
            "difflib",
            "difflib — Helpers for computing deltas",
            "unified_diff SequenceMatcher get_close_matches ndiff context_diff HtmlDiff",
        ),
    ),
    _f(
        "stdlib/text/unicodedata.json",
        _m(
            "unicodedata",
            "unicodedata — Unicode Database",
            "normalize is_normalized name lookup category east_asian_width",
        ),
    ),
    # dates and times
    _f(
        "stdlib/time/datetime.md",
        _m("datetime", "datetime — Basic date and time types", "datetime timedelta timezone date"),
    ),
    _f(
        "stdlib/time/time.txt",
        _m(
            "time",
            "time — Time access and conversions",
            "time sleep monotonic perf_counter strftime strptime localtime gmtime",
        ),
    ),
    _f(
        "stdlib/time/calendar.pdf",
        _m(
            "calendar",
            "calendar — General calendar-related functions",
            "monthrange isleap leapdays weekday timegm month Calendar TextCalendar",
        ),
    ),
    _f(
        "stdlib/time/zoneinfo.json",
        _m("zoneinfo", "zoneinfo — IANA time zone support", "ZoneInfo available_timezones reset_tzpath"),
    ),
    # numbers
    _f(
        "stdlib/numeric/decimal.md",
        _m(
            "decimal",
            "decimal — Decimal fixed point and floating point arithmetic",
            "Decimal getcontext localcontext Context",
        ),
    ),
    _f("stdlib/numeric/fractions.txt", _m("fractions", "fractions — Rational numbers", "Fraction")),
    _f(
        "stdlib/numeric/statistics.html",
        _m(
            "statistics",
            "statistics — Mathematical statistics functions",
            "mean median mode stdev variance quantiles correlation linear_regression NormalDist",
        ),
    ),
    _f(
        "stdlib/numeric/random.md",
        _m(
            "random",
            "random — Generate pseudo-random numbers",
            "seed random randint choice choices sample shuffle uniform gauss",
        ),
    ),
    _f(
        "stdlib/numeric/math.txt",
        _m("math", "math — Mathematical functions", "isclose sqrt floor ceil gcd lcm comb perm prod fsum log hypot"),
    ),
    # functional programming and containers
    _f(
        "stdlib/functional/collections.md",
        _m(
            "collections",
            "collections — Container datatypes",
            "Counter defaultdict deque namedtuple OrderedDict ChainMap",
        ),
    ),
    _f(
        "stdlib/functional/itertools.html",
        _m(
            "itertools",
            "itertools — Functions creating iterators for efficient looping",
            "chain groupby islice product permutations combinations accumulate "
            "zip_longest pairwise tee count cycle repeat",
        ),
    ),
    _f(
        "stdlib/functional/functools.txt",
        _m(
            "functools",
            "functools — Higher-order functions and operations on callable objects",
            "lru_cache cache cached_property partial reduce wraps singledispatch total_ordering",
        ),
    ),
    _f(
        "stdlib/functional/heapq_bisect.jsonl",
        _m("heapq", "heapq — Heap queue algorithm", "heappush heappop heapify heapreplace nlargest nsmallest merge"),
        _m("bisect", "bisect — Array bisection algorithm", "bisect_left bisect_right insort"),
    ),
    # networking and internet
    _f(
        "stdlib/net/socket.html",
        _m(
            "socket",
            "socket — Low-level networking interface",
            "create_connection create_server getaddrinfo gethostbyname socket",
        ),
    ),
    _f(
        "stdlib/net/ssl.txt",
        _m(
            "ssl",
            "ssl — TLS/SSL wrapper for socket objects",
            "create_default_context SSLContext SSLSocket get_server_certificate",
        ),
    ),
    _f(
        "stdlib/net/http_client.md",
        _m("http.client", "http.client — HTTP protocol client", "HTTPConnection HTTPSConnection HTTPResponse"),
    ),
    _f(
        "stdlib/net/urllib_parse.md",
        _m(
            "urllib.parse",
            "urllib.parse — Parse URLs into components",
            "urlparse urlsplit urljoin urlencode quote unquote parse_qs parse_qsl urlunparse",
        ),
    ),
    _f(
        "stdlib/net/mail.jsonl",
        _m("smtplib", "smtplib — SMTP protocol client", "SMTP SMTP_SSL"),
        _m("email.message", "email.message — Representing an email message", "EmailMessage"),
    ),
    # security
    _f(
        "stdlib/security/hashlib.md",
        _m(
            "hashlib",
            "hashlib — Secure hashes and message digests",
            "new sha256 file_digest pbkdf2_hmac scrypt blake2b",
        ),
    ),
    _f(
        "stdlib/security/hmac.txt",
        _m("hmac", "hmac — Keyed-Hashing for Message Authentication", "new digest compare_digest HMAC"),
    ),
    _f(
        "stdlib/security/secrets.html",
        _m(
            "secrets",
            "secrets — Generate secure random numbers for managing secrets",
            "token_hex token_urlsafe token_bytes choice randbelow compare_digest",
        ),
    ),
    # concurrency
    _f(
        "stdlib/concurrency/threading.pdf",
        _m(
            "threading",
            "threading — Thread-based parallelism",
            "Thread Lock RLock Event Condition Semaphore Timer local Barrier",
        ),
    ),
    _f(
        "stdlib/concurrency/subprocess.md",
        _m(
            "subprocess",
            "subprocess — Subprocess management",
            "run Popen check_output check_call CompletedProcess TimeoutExpired CalledProcessError",
        ),
    ),
    _f(
        "stdlib/concurrency/asyncio.txt",
        _m(
            "asyncio",
            "asyncio — Asynchronous I/O",
            "run create_task gather wait_for sleep TaskGroup timeout to_thread as_completed Queue Lock Event Semaphore",
        ),
    ),
    _f(
        "stdlib/concurrency/concurrent_futures.html",
        _m(
            "concurrent.futures",
            "concurrent.futures — Launching parallel tasks",
            "ThreadPoolExecutor ProcessPoolExecutor as_completed wait Future",
        ),
    ),
    # language and runtime
    _f(
        "stdlib/language/dataclasses.md",
        _m("dataclasses", "dataclasses — Data Classes", "dataclass field asdict astuple replace fields make_dataclass"),
    ),
    _f(
        "stdlib/language/enum.html",
        _m("enum", "enum — Support for enumerations", "Enum IntEnum StrEnum Flag auto unique"),
    ),
    _f(
        "stdlib/language/typing.txt",
        _m(
            "typing",
            "typing — Support for type hints",
            "TypedDict Protocol TypeVar Generic Optional Union Literal Callable Annotated "
            "cast overload get_type_hints NamedTuple",
        ),
    ),
    _f(
        "stdlib/language/contextlib.md",
        _m(
            "contextlib",
            "contextlib — Utilities for with-statement contexts",
            "contextmanager asynccontextmanager suppress ExitStack closing redirect_stdout nullcontext chdir",
        ),
    ),
    _f("stdlib/language/abc.txt", _m("abc", "abc — Abstract Base Classes", "ABC abstractmethod ABCMeta")),
    _f(
        "stdlib/language/memory.json",
        _m("weakref", "weakref — Weak references", "ref WeakValueDictionary WeakKeyDictionary finalize proxy"),
        _m(
            "gc",
            "gc — Garbage Collector interface",
            "collect disable enable get_objects get_referrers freeze set_threshold",
        ),
    ),
    _f(
        "stdlib/language/inspect.html",
        _m(
            "inspect",
            "inspect — Inspect live objects",
            "signature getsource getmembers getdoc isfunction iscoroutinefunction Signature Parameter",
        ),
    ),
    # development tools
    _f(
        "stdlib/devtools/logging.md",
        _m(
            "logging",
            "logging — Logging facility for Python",
            "basicConfig getLogger Logger Formatter StreamHandler FileHandler LoggerAdapter",
        ),
    ),
    _f(
        "stdlib/devtools/argparse.html",
        _m(
            "argparse",
            "argparse — Parser for command-line options, arguments and sub-commands",
            "ArgumentParser Namespace FileType",
        ),
    ),
    _f(
        "stdlib/devtools/traceback.txt",
        _m(
            "traceback",
            "traceback — Print or retrieve a stack traceback",
            "print_exc format_exc print_exception format_exception extract_tb TracebackException",
        ),
    ),
    _f(
        "stdlib/devtools/unittest.md",
        _m(
            "unittest",
            "unittest — Unit testing framework",
            "TestCase main skip skipIf expectedFailure IsolatedAsyncioTestCase TestSuite",
        ),
    ),
    _f(
        "stdlib/devtools/doctest.txt",
        _m(
            "doctest",
            "doctest — Test interactive Python examples",
            "testmod testfile DocTestSuite run_docstring_examples",
        ),
    ),
    _f(
        "stdlib/devtools/profiling.jsonl",
        _m("timeit", "timeit — Measure execution time of small code snippets", "timeit repeat Timer default_timer"),
        _m("cProfile", "cProfile — Deterministic profiling of Python programs", "run runctx Profile"),
    ),
    _f(
        "stdlib/devtools/tracemalloc.pdf",
        _m(
            "tracemalloc",
            "tracemalloc — Trace memory allocations",
            "start take_snapshot stop get_traced_memory is_tracing Snapshot Statistic Filter",
        ),
    ),
)


# --- extracting documentation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    kind: str  # "function" or "class"
    heading: str  # e.g. "json.dumps(obj, *, skipkeys=False, ...)"
    body: str


@dataclass(frozen=True)
class ModuleDoc:
    module: str
    title: str
    overview: str
    functions: tuple[Entry, ...]
    classes: tuple[Entry, ...]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _scrub(text: str) -> str:
    """Remove what varies between machines or processes, so the corpus is reproducible."""
    text = _ADDRESS.sub("", text)
    for prefix in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}, key=len, reverse=True):
        text = text.replace(prefix, "<prefix>")
    return "\n".join(line.rstrip() for line in text.expandtabs(4).split("\n")).strip()


def _truncate(text: str, limit: int) -> str:
    """Cut at the last paragraph (else line, else word) boundary before `limit` and mark the cut."""
    if len(text) <= limit:
        return text
    window = text[: limit - 2]
    for boundary in ("\n\n", "\n", " "):
        cut = window.rfind(boundary)
        if cut >= limit // 2:
            return window[:cut].rstrip() + " …"
    return window.rstrip() + " …"


def _signature(name: str, obj: Any) -> str:
    try:
        return _scrub(f"{name}{inspect.signature(obj)}")
    except (TypeError, ValueError):
        return name  # many C builtins and special forms expose no signature


def _doc(obj: Any) -> str:
    try:
        return _scrub(inspect.getdoc(obj) or "")
    except Exception:  # getdoc may touch descriptors that raise; documentation is best-effort
        return ""


def _first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n", 1)[0].split())


def _members(module: ModuleType, spec: ModuleSpec) -> list[tuple[str, Any]]:
    if hasattr(module, "__all__"):
        names = list(module.__all__)
    else:
        # Without __all__, keep what the module itself (or its C accelerator) defines, not its imports.
        owners = {module.__name__, "_" + module.__name__}
        names = [n for n in sorted(vars(module)) if getattr(getattr(module, n), "__module__", None) in owners]
    chosen: list[tuple[str, Any]] = []
    for name in list(spec.priority) + [n for n in names if n not in spec.priority]:
        if name.startswith("_") or not hasattr(module, name):
            continue
        obj = getattr(module, name)
        if isinstance(obj, ModuleType) or not (callable(obj) or name in spec.priority):
            continue  # constants and re-exported submodules have nothing to read
        chosen.append((name, obj))

    # Exceptions document little, so they come after everything else that was not asked for by name.
    def rank(item: tuple[str, Any]) -> int:
        name, obj = item
        if name in spec.priority:
            return 0
        return 2 if inspect.isclass(obj) and issubclass(obj, BaseException) else 1

    return sorted(chosen, key=rank)


def _method_lines(cls: type) -> list[str]:
    lines: list[str] = []
    seen: set[str] = set()
    # Walk the MRO but stay inside the class's own module: inherited API such as
    # ArgumentParser.add_argument matters, object/ABC plumbing does not.
    for klass in cls.__mro__:
        if klass.__module__ != cls.__module__:
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            member = getattr(cls, name, None)
            if isinstance(raw, property):
                heading = f"{name} (property)"
            elif callable(member):
                heading = _signature(name, member)
            else:
                continue
            summary = _truncate(_first_paragraph(_doc(raw if isinstance(raw, property) else member)), MAX_METHOD_CHARS)
            lines.append(f"{heading}\n    {summary}" if summary else heading)
    return lines


def extract(spec: ModuleSpec) -> ModuleDoc:
    module = importlib.import_module(spec.name)
    overview = _truncate(_doc(module), MAX_OVERVIEW_CHARS)
    if not overview:
        overview = spec.title.split(" — ", 1)[-1] + "."
    budget = MAX_MODULE_CHARS - len(spec.title) - len(overview)
    functions: list[Entry] = []
    classes: list[Entry] = []
    for name, obj in _members(module, spec):
        qualified = f"{spec.name}.{name}"
        if inspect.isclass(obj):
            doc = _truncate(_doc(obj), MAX_CLASS_DOC_CHARS)
            methods = _method_lines(obj)
            body = doc
            if methods:
                body = (body + "\n\nMethods:\n\n" if body else "Methods:\n\n") + "\n".join(methods)
            entry = Entry("class", "class " + _signature(qualified, obj), _truncate(body, MAX_CLASS_CHARS))
        else:
            entry = Entry("function", _signature(qualified, obj), _truncate(_doc(obj), MAX_FUNCTION_CHARS))
        size = len(entry.heading) + len(entry.body) + 4
        if size > budget:
            continue  # a smaller entry further down may still fit
        budget -= size
        (classes if entry.kind == "class" else functions).append(entry)
    return ModuleDoc(spec.name, spec.title, overview, tuple(functions), tuple(classes))


# --- rendering ---------------------------------------------------------------------------------------


def _sections(doc: ModuleDoc) -> list[tuple[str, tuple[Entry, ...]]]:
    return [(label, entries) for label, entries in (("Functions", doc.functions), ("Classes", doc.classes)) if entries]


def _entries_text(entries: tuple[Entry, ...]) -> str:
    blocks = []
    for entry in entries:
        body = "\n".join("    " + line if line else "" for line in entry.body.split("\n"))
        blocks.append(f"{entry.heading}\n{body}" if entry.body else entry.heading)
    return "\n\n".join(blocks)


def _plain_body(doc: ModuleDoc) -> str:
    """The text without the title, used where the title travels separately (JSON, PDF metadata)."""
    parts = [doc.overview]
    for label, entries in _sections(doc):
        parts += [label.upper(), _entries_text(entries)]
    return "\n\n".join(parts) + "\n"


def render_text(docs: list[ModuleDoc]) -> bytes:
    blocks = [f"{d.title}\n{'=' * len(d.title)}\n\n{_plain_body(d)}" for d in docs]
    return "\n\n".join(blocks).encode()


def render_markdown(docs: list[ModuleDoc]) -> bytes:
    out: list[str] = []
    for doc in docs:
        out.append(f"# {doc.title}\n\n{doc.overview}\n")
        for label, entries in _sections(doc):
            out.append(f"## {label}\n")
            for entry in entries:
                # Docstrings are plain text laid out by indentation; a fence keeps Markdown from reflowing them.
                out.append(f"### `{entry.heading}`\n")
                if entry.body:
                    out.append(f"```text\n{entry.body}\n```\n")
    out.append(f"---\n\nSource: {SOURCE}.\n")
    return "\n".join(out).encode()


_HTML_STYLE = "body{font-family:sans-serif;max-width:52em;margin:2em auto}pre{background:#f6f8fa;padding:.5em}"
_HTML_SCRIPT = 'document.documentElement.classList.add("js");'


def _html_paragraphs(text: str) -> str:
    out = []
    for para in text.split("\n\n"):
        lines = para.split("\n")
        # Indented or example-style blocks keep their layout; prose becomes a normal paragraph.
        if any(line.startswith((" ", ">>>")) for line in lines):
            out.append(f"<pre>{html.escape(para)}</pre>")
        else:
            out.append(f"<p>{html.escape(' '.join(lines))}</p>")
    return "\n".join(out)


def render_html(docs: list[ModuleDoc]) -> bytes:
    page_title = docs[0].title if len(docs) == 1 else " / ".join(d.module for d in docs)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(page_title)}</title>",
        f"<style>{_HTML_STYLE}</style>",
        "</head>",
        "<body>",
    ]
    for doc in docs:
        out += [f'<article id="{doc.module}">', f"<h1>{html.escape(doc.title)}</h1>", _html_paragraphs(doc.overview)]
        for label, entries in _sections(doc):
            out.append(f"<h2>{label}</h2>")
            for entry in entries:
                out.append(f"<section><h3><code>{html.escape(entry.heading)}</code></h3>")
                if entry.body:
                    out.append(f"<pre>{html.escape(entry.body)}</pre>")
                out.append("</section>")
        out.append("</article>")
    out += [
        f"<footer><p>Source: {html.escape(SOURCE)}.</p></footer>",
        f"<script>{_HTML_SCRIPT}</script>",
        "</body>",
        "</html>",
    ]
    return ("\n".join(out) + "\n").encode()


def _record(doc: ModuleDoc) -> dict[str, str]:
    return {"title": doc.title, "module": doc.module, "source": SOURCE, "text": _plain_body(doc)}


def render_json(docs: list[ModuleDoc]) -> bytes:
    value: Any = _record(docs[0]) if len(docs) == 1 else [_record(d) for d in docs]
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode()


def render_jsonl(docs: list[ModuleDoc]) -> bytes:
    return "".join(json.dumps(_record(d), ensure_ascii=False) + "\n" for d in docs).encode()


def render_pdf(docs: list[ModuleDoc]) -> bytes:
    # Each section starts on a fresh page, as it would in a printed manual.
    pages: list[str] = []
    for doc in docs:
        pages.append(f"{doc.title}\n\n{doc.overview}")
        pages += [f"{label.upper()}\n\n{_entries_text(entries)}" for label, entries in _sections(doc)]
    return minimal_pdf(pages, title=docs[0].title if len(docs) == 1 else None)


RENDERERS: dict[str, Callable[[list[ModuleDoc]], bytes]] = {
    ".txt": render_text,
    ".md": render_markdown,
    ".html": render_html,
    ".json": render_json,
    ".jsonl": render_jsonl,
    ".pdf": render_pdf,
}


# --- building ----------------------------------------------------------------------------------------


def build(outdir: Path) -> dict[str, int]:
    """Write the corpus under `outdir`/stdlib and return {key: size in bytes}."""
    outdir.mkdir(parents=True, exist_ok=True)
    staging = outdir / ".stdlib.building"
    target = outdir / "stdlib"
    if staging.exists():
        shutil.rmtree(staging)
    sizes: dict[str, int] = {}
    for item in CORPUS:
        suffix = Path(item.key).suffix
        data = RENDERERS[suffix]([extract(spec) for spec in item.modules])
        path = staging / Path(item.key).relative_to("stdlib")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        sizes[item.key] = len(data)
    # Build aside and swap, so a failed run never leaves a half-written corpus behind.
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime_ops.demo.build_corpus", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("outdir", type=Path, help="folder to write; its stdlib/ sub-folder is replaced")
    args = parser.parse_args(argv)
    sizes = build(args.outdir)
    by_format: dict[str, list[int]] = {}
    for key, size in sizes.items():
        by_format.setdefault(Path(key).suffix, []).append(size)
    for suffix, values in sorted(by_format.items()):
        print(f"{suffix:7} {len(values):3} files {sum(values):9,} bytes")
    print(f"total   {len(sizes):3} files {sum(sizes.values()):9,} bytes -> {args.outdir / 'stdlib'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
