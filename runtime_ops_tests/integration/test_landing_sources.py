"""Landing sources (local folder and S3 through moto's real HTTP server) behave the same: global UTF-8
binary key order, exact ``start_after`` resumption, bounded pages, versions that change on overwrite,
ObjectChanged/ObjectGone on read, ignored temp files, unicode and awkward keys, streaming memory."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime_ops import landing
from runtime_ops.landing import (
    LandingBucketMissing,
    LandingSource,
    LocalLandingSource,
    ObjectChanged,
    ObjectGone,
    ObjectRef,
    S3LandingSource,
    open_landing,
)
from runtime_ops.landing import local as local_landing

# --------------------------------------------------------------------------------------------- fixtures


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Moto:
    endpoint_url: str
    client: Any  # a boto3 S3 client bound to the moto server

    def new_bucket(self) -> str:
        name = f"landing-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="module")
def landing_moto() -> Iterator[Moto]:
    """moto's real HTTP server on 127.0.0.1 (free port), once for this module, stopped at the end."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.delenv("AWS_PROFILE", raising=False)
        mp.delenv("AWS_SESSION_TOKEN", raising=False)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        port = _free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            url = f"http://127.0.0.1:{port}"
            probe = S3LandingSource("s3://probe", endpoint_url=url)
            yield Moto(endpoint_url=url, client=probe.client)
        finally:
            server.stop()


@dataclass
class Landing:
    """A fresh landing source plus backdoors that bypass its validation (temp files, deletes, markers)."""

    source: LandingSource
    raw_put: Callable[[str, bytes], None]
    delete: Callable[[str], None]
    kind: str

    def keys(self, **kw) -> list[str]:
        return [r.key for page in self.source.iter_pages(**kw) for r in page]


def _local_landing(tmp_path: Path) -> Landing:
    root = tmp_path / "landing" / "in"  # does not exist yet: the source creates it
    src = open_landing(str(root))

    def raw_put(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return Landing(src, raw_put, lambda key: (root / key).unlink(), "local")


def _s3_landing(moto: Moto, prefix: str = "landing/in/") -> Landing:
    bucket = moto.new_bucket()
    src = open_landing(f"s3://{bucket}/{prefix}", endpoint_url=moto.endpoint_url)
    assert isinstance(src, S3LandingSource)
    client = src.client
    return Landing(
        src,
        lambda key, data: client.put_object(Bucket=bucket, Key=src.prefix + key, Body=data),
        lambda key: client.delete_object(Bucket=bucket, Key=src.prefix + key),
        "s3",
    )


@pytest.fixture(params=["local", "s3"])
def land(request, tmp_path: Path) -> Landing:
    if request.param == "local":
        return _local_landing(tmp_path)
    return _s3_landing(request.getfixturevalue("landing_moto"))


def utf8_sorted(keys) -> list[str]:
    return sorted(keys, key=lambda k: k.encode("utf-8"))


# ------------------------------------------------------------------------------------------------ order

NESTED = [
    "a.txt",
    "a/x.txt",  # the trap: directory "a" sorts as "a/", after "a.txt" and before "a0"
    "a/b/c.txt",
    "a/b.txt",
    "a/b/c/d/e.txt",
    "a-b.txt",
    "a0",
    "A.txt",
    "b/z.txt",
    "b/a/deep/er/file.md",
    "b.md",
    "ba/1.txt",
    "c",
    "z/y/x/w.txt",
    "_under.txt",
    "~tilde.txt",
]


def test_global_order_across_nested_folders(land: Landing):
    for i, key in enumerate(NESTED):
        land.source.put(key, f"doc {i}".encode())
    listed = land.keys()
    assert listed == utf8_sorted(NESTED)
    assert listed.index("a.txt") < listed.index("a/x.txt") < listed.index("a0")
    assert listed.index("a-b.txt") < listed.index("a.txt")  # '-' < '.' < '/' < '0'


def test_start_after_resumes_exactly_after_a_key(land: Landing):
    for key in NESTED:
        land.source.put(key, b"x")
    expected = utf8_sorted(NESTED)
    cursors = [*expected, "a/", "a/b", "a/b/", "a/w", "a.txt0", "b/m", "aa", "0", "zzz", "a/b/c/d/e.txt~"]
    for cursor in cursors:  # existing keys and keys that never existed or no longer exist
        assert land.keys(start_after=cursor) == [k for k in expected if k > cursor], cursor
    assert land.keys(start_after=None) == expected

    # a cursor key that was deleted after the previous scan
    land.delete("a/b.txt")
    assert land.keys(start_after="a/b.txt") == [k for k in expected if k > "a/b.txt"]
    # resuming page by page from the last key of each page reproduces the full listing
    resumed, cursor = [], None
    while True:
        page = next(iter(land.source.iter_pages(start_after=cursor, page_size=4)), None)
        if not page:
            break
        resumed += [r.key for r in page]
        cursor = page[-1].key
    assert resumed == [k for k in expected if k != "a/b.txt"]


def test_pages_respect_page_size(land: Landing):
    keys = [f"d{i % 3}/f{i:03d}.txt" for i in range(25)]
    for key in keys:
        land.source.put(key, b"p")
    pages = list(land.source.iter_pages(page_size=7))
    assert [len(p) for p in pages] == [7, 7, 7, 4]
    assert [r.key for p in pages for r in p] == utf8_sorted(keys)
    assert [len(p) for p in land.source.iter_pages(page_size=1)] == [1] * 25
    assert [len(p) for p in land.source.iter_pages(page_size=25)] == [25]
    assert [len(p) for p in land.source.iter_pages(start_after=utf8_sorted(keys)[-1])] == []
    with pytest.raises(ValueError):
        list(land.source.iter_pages(page_size=0))


def test_empty_landing_yields_no_pages(land: Landing):
    assert list(land.source.iter_pages()) == []


def test_two_objects_written_in_the_same_second_are_both_listed(land: Landing):
    land.source.put("same/one.txt", b"first")
    land.source.put("same/two.txt", b"second")
    if land.kind == "local":  # force identical timestamps, as on a coarse-clock filesystem
        root = Path(land.source.uri)
        ns = (int(time.time()) - 5) * 1_000_000_000
        for key in ("same/one.txt", "same/two.txt"):
            os.utime(root / key, ns=(ns, ns))
    refs = [r for page in land.source.iter_pages() for r in page]
    assert [r.key for r in refs] == ["same/one.txt", "same/two.txt"]
    if land.kind == "local":
        assert refs[0].last_modified == refs[1].last_modified
    for ref in refs:
        assert ref.last_modified.tzinfo is not None and ref.last_modified.utcoffset().total_seconds() == 0
    assert land.source.read(refs[0]) == b"first" and land.source.read(refs[1]) == b"second"


def test_overwrite_gives_new_version_and_old_ref_read_raises(land: Landing):
    old = land.source.put("doc.txt", b"AAAA")
    new = land.source.put("doc.txt", b"BBBB")  # same size, same second
    assert new.version != old.version
    [listed] = [r for page in land.source.iter_pages() for r in page]
    assert (listed.key, listed.version, listed.size) == (new.key, new.version, new.size)
    with pytest.raises(ObjectChanged) as info:
        land.source.read(old)
    msg = str(info.value)
    assert "doc.txt" in msg and old.version in msg and new.version in msg
    assert land.source.read(listed) == b"BBBB"
    if land.kind == "local":
        st = (Path(land.source.uri) / "doc.txt").stat()
        assert listed.version == f"{st.st_size}-{st.st_mtime_ns}" and old.version.startswith("4-")
    else:
        import hashlib

        assert new.version == hashlib.md5(b"BBBB").hexdigest()  # the ETag, without quotes


def test_deleted_object_raises_object_gone(land: Landing):
    ref = land.source.put("gone/soon.txt", b"bye")
    land.delete("gone/soon.txt")
    with pytest.raises(ObjectGone, match=r"gone/soon\.txt"):
        land.source.read(ref)
    assert land.keys() == []


def test_temp_and_hidden_files_are_ignored(land: Landing):
    for key in [
        ".hidden",
        ".partial.pdf.a1b2.tmp",
        "dir/.in-progress",
        ".git/config",
        "nested/.cache/x.txt",
        "upload.tmp",
        "big.pdf.part",
        "movie.mp4.crdownload",
        "deep/er/report.pdf.part",
    ]:
        land.raw_put(key, b"temp")
    if land.kind == "s3":
        land.raw_put("folder/", b"")  # console-created "directory marker"
        land.raw_put("folder/sub/", b"")
    land.source.put("ok.txt", b"ok")
    land.source.put("folder/doc.md", b"doc")
    land.source.put("dir/real.txt", b"real")
    assert land.keys() == ["dir/real.txt", "folder/doc.md", "ok.txt"]
    assert [len(p) for p in land.source.iter_pages(page_size=2)] == [2, 1]  # pages re-packed after filtering
    for bad in (".x", "a/.b", "x.tmp", "x.part", "x.crdownload", "../escape", "/abs", "a//b", "dir/"):
        with pytest.raises(ValueError):
            land.source.put(bad, b"no")


def test_unicode_keys_in_utf8_binary_order(land: Landing):
    keys = [
        "résumé.txt",
        "resume.txt",
        "日本/文書.md",
        "日本.md",
        "Zürich.txt",
        "zebra.txt",
        "ü/ä.txt",
        "emoji-😀.txt",
    ]
    for key in keys:
        land.source.put(key, key.encode("utf-8"))
    listed = land.keys()
    assert listed == utf8_sorted(keys)
    assert listed.index("résumé.txt") < listed.index("ü/ä.txt") < listed.index("日本.md") < listed.index("日本/文書.md")
    refs = {r.key: r for page in land.source.iter_pages() for r in page}
    for key in keys:
        assert land.source.read(refs[key]) == key.encode("utf-8")
    assert land.keys(start_after="résumé.txt") == [k for k in utf8_sorted(keys) if k > "résumé.txt"]
    assert land.keys(start_after="日本") == ["日本.md", "日本/文書.md"]


def test_keys_with_spaces_plus_and_reserved_characters(land: Landing):
    keys = ["a b.txt", "a+b.txt", "a%20b.txt", "q?x=1&y=2.txt", "sp ace/pl+us/f i+le.md", "hash#tag.txt"]
    for key in keys:
        land.source.put(key, key.encode())
    assert land.keys() == utf8_sorted(keys)
    refs = {r.key: r for page in land.source.iter_pages() for r in page}
    for key in keys:
        assert land.source.read(refs[key]) == key.encode()
    assert land.keys(start_after="a b.txt") == [k for k in utf8_sorted(keys) if k > "a b.txt"]
    assert land.keys(start_after="a+b.txt") == [k for k in utf8_sorted(keys) if k > "a+b.txt"]


# ---------------------------------------------------------------------------------------------- S3 only


@pytest.mark.parametrize(
    ("uri_tail", "prefix", "uri_norm"),
    [
        ("", "", ""),
        ("/", "", ""),
        ("/some/prefix", "some/prefix/", "/some/prefix"),
        ("/some/prefix/", "some/prefix/", "/some/prefix"),
    ],
)
def test_s3_prefix_handling(landing_moto: Moto, uri_tail: str, prefix: str, uri_norm: str):
    bucket = landing_moto.new_bucket()
    client = landing_moto.client
    for key in ["top.txt", "some/prefix/a.txt", "some/prefix/b/c.txt", "some/prefixed.txt", "some/other.txt"]:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    src = open_landing(f"s3://{bucket}{uri_tail}", endpoint_url=landing_moto.endpoint_url)
    assert isinstance(src, S3LandingSource)
    assert src.prefix == prefix and src.uri == f"s3://{bucket}{uri_norm}"
    keys = [r.key for page in src.iter_pages() for r in page]
    if prefix:
        assert keys == ["a.txt", "b/c.txt"]
        ref = src.put("new.txt", b"n")
        assert client.get_object(Bucket=bucket, Key="some/prefix/new.txt")["Body"].read() == b"n"
        assert src.read(ref) == b"n"
    else:
        assert keys == sorted(
            ["top.txt", "some/prefix/a.txt", "some/prefix/b/c.txt", "some/prefixed.txt", "some/other.txt"]
        )


def test_s3_missing_bucket_names_bucket_and_setting(landing_moto: Moto):
    src = open_landing("s3://no-such-landing-bucket/in", endpoint_url=landing_moto.endpoint_url)
    assert isinstance(src, S3LandingSource)
    with pytest.raises(LandingBucketMissing, match="no-such-landing-bucket") as info:
        list(src.iter_pages())
    assert "RUNTIME_OPS_LANDING" in str(info.value)
    with pytest.raises(LandingBucketMissing, match="RUNTIME_OPS_LANDING"):
        src.check()
    with pytest.raises(LandingBucketMissing, match="no-such-landing-bucket"):
        src.put("x.txt", b"x")


def test_s3_endpoint_falls_back_to_aws_endpoint_url(landing_moto: Moto, monkeypatch: pytest.MonkeyPatch):
    bucket = landing_moto.new_bucket()
    landing_moto.client.put_object(Bucket=bucket, Key="k.txt", Body=b"k")
    monkeypatch.setenv("AWS_ENDPOINT_URL", landing_moto.endpoint_url)
    src = open_landing(f"s3://{bucket}")
    assert isinstance(src, S3LandingSource)
    assert src.endpoint_url == landing_moto.endpoint_url
    assert [r.key for p in src.iter_pages() for r in p] == ["k.txt"]


def test_s3_listing_is_paged_lazily(landing_moto: Moto):
    land = _s3_landing(landing_moto)
    for i in range(30):
        land.raw_put(f"f{i:02d}.txt", b"x")
    src = land.source
    assert isinstance(src, S3LandingSource)
    calls: list[dict] = []
    real_client = src.client

    class Spy:
        def list_objects_v2(self, **kwargs):
            calls.append(kwargs)
            return real_client.list_objects_v2(**kwargs)

        def __getattr__(self, name):
            return getattr(real_client, name)

    src._client = Spy()
    pages = src.iter_pages(start_after="f09.txt", page_size=10)
    assert calls == []  # nothing listed before the first page is asked for
    first = next(pages)
    assert [r.key for r in first] == [f"f{i:02d}.txt" for i in range(10, 20)]
    assert len(calls) == 1
    assert calls[0]["StartAfter"] == "landing/in/f09.txt" and calls[0]["MaxKeys"] == 10
    assert calls[0]["Prefix"] == "landing/in/"
    rest = list(pages)
    assert [len(p) for p in rest] == [10]
    assert "ContinuationToken" in calls[1]


def test_s3_read_precondition_uses_if_match(landing_moto: Moto):
    land = _s3_landing(landing_moto)
    ref = land.source.put("x.txt", b"abc")
    forged = ObjectRef(key="x.txt", version="0" * 32, size=3, last_modified=ref.last_modified)
    with pytest.raises(ObjectChanged, match=r"x\.txt"):
        land.source.read(forged)
    assert land.source.read(ref) == b"abc"


# ------------------------------------------------------------------------------------------- local only


def test_module_import_is_light_and_s3_client_is_lazy():
    code = (
        "import sys; import runtime_ops.landing as l; "
        "s = l.open_landing('s3://bucket/p'); "
        "heavy = [m for m in ('boto3', 'botocore', 'dagster', 'dagster_aws') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_open_landing_local_creates_root_and_rejects_bad_uris(tmp_path: Path):
    root = tmp_path / "a" / "b" / "landing"
    src = open_landing(str(root))
    assert isinstance(src, LocalLandingSource) and root.is_dir() and src.uri == str(root)
    assert isinstance(src, LandingSource)
    with pytest.raises(ValueError, match="RUNTIME_OPS_LANDING"):
        open_landing("gs://bucket/x")
    with pytest.raises(ValueError, match="bucket"):
        open_landing("s3:///prefix")
    (tmp_path / "file").write_text("x")
    with pytest.raises(landing.LandingError, match="RUNTIME_OPS_LANDING"):
        open_landing(str(tmp_path / "file"))


def test_local_links_are_never_followed_nor_listed(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    src = open_landing(str(tmp_path / "root"))
    root = Path(src.uri)
    ref = src.put("docs/inside.txt", b"inside")
    (root / "escape-dir").symlink_to(outside, target_is_directory=True)
    (root / "escape-file.txt").symlink_to(outside / "secret.txt")
    (root / "docs" / "alias.txt").symlink_to(root / "docs" / "inside.txt")  # inside the root: still a link
    (root / "docs" / "loop").symlink_to(root, target_is_directory=True)
    (root / "dangling.txt").symlink_to(root / "nope.txt")
    os.mkfifo(root / "fifo.txt")
    refs = [r for page in src.iter_pages() for r in page]
    assert [r.key for r in refs] == ["docs/inside.txt"]
    assert src.read(refs[0]) == b"inside"
    for key, at in [
        ("escape-file.txt", "'escape-file.txt' is a symbolic link"),
        ("escape-dir/secret.txt", "'escape-dir' is a symbolic link"),
        ("docs/alias.txt", "'docs/alias.txt' is a symbolic link"),
        ("docs/loop/docs/inside.txt", "'docs/loop' is a symbolic link"),
        ("fifo.txt", "'fifo.txt' is a FIFO"),  # and the read does not wait for a writer
    ]:
        with pytest.raises(landing.UnsafePath, match=re.escape(f"{key!r} is refused: {at}")):
            src.read(ObjectRef(key, ref.version, 6, ref.last_modified))
        with pytest.raises(landing.UnsafePath, match=re.escape(at)):
            src.exists(key)
        with pytest.raises(landing.UnsafePath, match=re.escape(at)):
            src.delete(key)
    with pytest.raises(landing.UnsafePath, match=re.escape("'escape-dir' is a symbolic link")):
        src.put("escape-dir/made/planted.txt", b"x")
    with pytest.raises(landing.UnsafePath, match=re.escape("'docs/alias.txt' is a symbolic link")):
        src.put("docs/alias.txt", b"x")
    assert [p.name for p in outside.iterdir()] == ["secret.txt"] and (outside / "secret.txt").read_text() == "secret"
    assert (root / "docs" / "alias.txt").is_symlink() and (root / "escape-file.txt").is_symlink()


def test_local_start_after_prunes_subtrees_without_walking_them(tmp_path: Path, monkeypatch):
    src = open_landing(str(tmp_path / "root"))
    for d in ("a", "b", "c"):
        for sub in ("x", "y"):
            for i in range(3):
                src.put(f"{d}/{sub}/{i}.txt", b"x")
    scanned: list[str] = []
    real_scan = local_landing.LocalLandingSource._scan

    def spy(self, fd, prefix, start_after):
        scanned.append(prefix.rstrip("/") or ".")
        return real_scan(self, fd, prefix, start_after)

    monkeypatch.setattr(local_landing.LocalLandingSource, "_scan", spy)
    keys = [r.key for p in src.iter_pages(start_after="b/x/1.txt") for r in p]
    assert keys[:3] == ["b/x/2.txt", "b/y/0.txt", "b/y/1.txt"] and keys[-1] == "c/y/2.txt"
    assert scanned == [".", "b", "b/x", "b/y", "c", "c/x", "c/y"]  # "a" and everything in it never opened


def test_local_read_verifies_size_and_mtime(tmp_path: Path):
    src = open_landing(str(tmp_path / "root"))
    ref = src.put("f.txt", b"hello")
    path = Path(src.uri) / "f.txt"
    st = path.stat()
    path.write_bytes(b"hello world")  # rewritten in place: size differs
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old mtime restored
    with pytest.raises(ObjectChanged, match=r"f\.txt.*5-"):
        src.read(ref)
    path.write_bytes(b"HELLO")  # same size, new mtime
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    with pytest.raises(ObjectChanged):
        src.read(ref)
    assert ref.version == f"{st.st_size}-{st.st_mtime_ns}"
    assert not [p for p in Path(src.uri).iterdir() if p.name.startswith(".")]  # no temp file left by put


def test_local_iteration_is_streaming_one_page_plus_directory_stack(tmp_path: Path, monkeypatch):
    """20k files in 100 folders: the first page of 1,000 is produced after opening only the folders it
    spans, with a tracemalloc peak far below what the full listing takes."""
    root = tmp_path / "big"
    for d in range(100):
        folder = root / f"dir{d:03d}"
        folder.mkdir(parents=True)
        for f in range(200):
            (folder / f"file{f:04d}.txt").write_bytes(b"x")
    src = open_landing(str(root))

    opened: list[str] = []
    real_scan = local_landing.LocalLandingSource._scan
    monkeypatch.setattr(
        local_landing.LocalLandingSource,
        "_scan",
        lambda self, fd, p, sa: (opened.append(p), real_scan(self, fd, p, sa))[1],
    )

    tracemalloc.start()
    try:
        pages = src.iter_pages(page_size=1000)
        assert isinstance(pages, Generator)  # closed below
        first = next(pages)
        _, first_peak = tracemalloc.get_traced_memory()
        pages.close()
        assert len(first) == 1000 and first[0].key == "dir000/file0000.txt" and first[-1].key == "dir004/file0199.txt"
        assert len(opened) == 1 + 5  # the root, then exactly the five folders this page spans
        del first
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        everything = [r for page in src.iter_pages(page_size=1000) for r in page]
        full_listing = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(everything) == 20_000
    print(f"\nfirst page peak {first_peak / 1e6:.2f} MB vs full listing {full_listing / 1e6:.2f} MB")
    assert first_peak < full_listing / 8
