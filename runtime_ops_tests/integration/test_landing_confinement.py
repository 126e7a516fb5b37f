"""The local landing never leaves its folder (issue 25): no link is followed on a write, a read, a delete or a
listing, whatever is swapped in while it looks; the webhook answers such keys with a 400 naming them (never a
503) and makes nothing anywhere; it takes JSON bodies only; and no body a fuzzer makes gets a 5xx or lands a byte
outside the folder. Real uvicorn, PostgreSQL and Dagster instance; no mocks."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime_ops.landing import ObjectGone, UnsafePath, open_landing
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import Flow

SECRET = "hook-secret"
HOOK = {"X-Runtime-Ops-Token": SECRET}


def _tree(root: Path) -> dict[str, bytes | str]:
    """Everything under `root`: files by content, links by target, folders by name (nothing followed)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "<folder>"
            elif path.is_file():
                out[rel] = path.read_bytes()
            else:
                out[rel] = "<special>"
    return out


@pytest.fixture
def api(env, postgres_url, tmp_path) -> Iterator[ApiServer]:  # type: ignore[no-untyped-def]
    env(database_url=postgres_url, landing=str(tmp_path / "landing"), RUNTIME_OPS_WEBHOOK_SECRET=SECRET)
    (tmp_path / "landing").mkdir()
    with ApiServer(get_settings()) as server:
        yield server


def test_a_webhook_key_through_a_folder_link_is_a_400_naming_it_and_nothing_is_made(
    api: ApiServer, tmp_path: Path
) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    outside.mkdir()
    (landing / "outdir").symlink_to(outside, target_is_directory=True)
    (outside / "secret.txt").write_text("not the landing's")
    (landing / "doc.txt").symlink_to(outside / "secret.txt")
    before_outside, before_landing = _tree(outside), _tree(landing)
    for objects, deleted, key, at in [
        (
            [{"key": "ok.txt", "content": "x"}, {"key": "outdir/made/x.txt", "content": "y"}],
            [],
            "outdir/made/x.txt",
            "outdir",
        ),
        ([{"key": "outdir/secret.txt", "content": "overwritten"}], [], "outdir/secret.txt", "outdir"),
        ([{"key": "doc.txt", "content": "through the link"}], [], "doc.txt", "doc.txt"),
        ([], ["outdir/secret.txt"], "outdir/secret.txt", "outdir"),
    ]:
        reply = web.post(
            f"{api.url}/webhooks/landing", json={"objects": objects, "deleted": deleted}, headers=HOOK, timeout=30
        )
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"].startswith("nothing landed")
        [problem] = reply.json()["problems"]
        assert f"landing key {key!r} is refused: {at!r} is a symbolic link" in problem, problem
        assert _tree(outside) == before_outside, "nothing made, written or deleted outside the landing"
        assert _tree(landing) == before_landing, "nothing half-landed inside either"


def test_the_landing_webhook_takes_json_only(api: ApiServer, tmp_path: Path) -> None:
    body = json.dumps({"objects": [{"key": "a.txt", "content": "hello"}]}).encode()
    url = f"{api.url}/webhooks/landing"
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        headers = {**HOOK, **({"Content-Type": content_type} if content_type else {})}
        reply = web.post(url, content=body, headers=headers, timeout=30)
        assert reply.status_code == 415, (content_type, reply.text)
        assert "Content-Type: application/json" in reply.json()["error"]
    assert not (tmp_path / "landing" / "a.txt").exists()
    for content_type in ("application/json", "application/json; charset=utf-8", "application/vnd.example+json"):
        reply = web.post(url, content=body, headers={**HOOK, "Content-Type": content_type}, timeout=30)
        assert reply.status_code == 202, (content_type, reply.text)
    # The token is still checked first: a wrong one is a 401 whatever the body.
    reply = web.post(url, content=body, headers={"X-Runtime-Ops-Token": "wrong", "Content-Type": "text/plain"})
    assert reply.status_code == 401


def test_a_file_swapped_for_a_link_while_it_is_read_never_yields_what_the_link_points_at(tmp_path: Path) -> None:
    """A thread swaps `doc.txt` between the real file and a link to a file outside with the same size and mtime
    (so the version check passes either way) while the landing reads it; seeded, at most 10,000 reads."""
    inside, secret = b"the landing's own document", b"OUTSIDE the landing folder"
    assert len(inside) == len(secret)
    src = open_landing(str(tmp_path / "landing"))
    root = Path(src.uri)
    ref = src.put("doc.txt", inside)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(secret)
    st = (root / "doc.txt").stat()
    os.utime(outside, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.link(root / "doc.txt", root / ".keep")  # the real file, to swap back in (same inode, same version)
    stop = threading.Event()
    rng = random.Random(25)
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            if rng.random() < 0.5:
                os.symlink(outside, root / ".link")
                os.replace(root / ".link", root / "doc.txt")
            else:
                os.link(root / ".keep", root / ".real")
                os.replace(root / ".real", root / "doc.txt")
                # Renaming a name over another link to the same file does nothing (POSIX): drop it then.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(root / ".real")
            swaps += 1

    outcomes = {"inside": 0, "refused": 0, "gone": 0, "leaked": 0}
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        for _ in range(10_000):
            try:
                data = src.read(ref)
            except UnsafePath:
                outcomes["refused"] += 1
                continue
            except ObjectGone:  # today's check-then-open refuses some reads this way (and lets others through)
                outcomes["gone"] += 1
                continue
            if data == secret:
                outcomes["leaked"] += 1
                break
            assert data == inside
            outcomes["inside"] += 1
    finally:
        stop.set()
        swapper.join(timeout=30)
    assert not swapper.is_alive()
    assert outcomes["leaked"] == 0, f"read the file a link points at: {outcomes} after {swaps} swaps"
    assert outcomes["inside"] and outcomes["refused"], f"the swap did not meet the reads: {outcomes}"
    print(f"\n{outcomes} after {swaps} swaps")


def test_the_sensor_quarantines_a_listed_file_that_became_a_link_before_it_was_read(
    env, postgres_url, dagster_instance, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    root, outside = tmp_path / "landing", tmp_path / "outside.txt"
    env(database_url=postgres_url, landing=str(root))
    flow = Flow(dagster_instance)
    src = open_landing(str(root))
    src.put("notes/plain.md", b"# Plain\n\nA document about retry budgets and backoff.")
    src.put("notes/swapped.md", b"# Swapped\n\nThis one is replaced by a link.")
    [request] = flow.tick("landing_sensor")
    outside.write_bytes(b"# Outside\n\nSecrets the landing must never ingest.")
    (root / "notes" / "swapped.md").unlink()
    (root / "notes" / "swapped.md").symlink_to(outside)
    assert flow.run("landing_sensor", request).success
    store = open_store(get_settings().resolved_database_url, get_settings())
    [doc] = store.documents.documents_by_status("quarantined")
    assert doc["key"] == "notes/swapped.md" and doc["quarantine_code"] == "unsafe_path"
    assert "'notes/swapped.md' is a symbolic link" in doc["reason"]
    assert {d["key"] for d in store.documents.documents_by_status("ok")} == {"notes/plain.md"}
    assert all("Secrets" not in text for _, _, text in store.documents.current_chunks())


# --------------------------------------------------------------------------------------------------- fuzzing

# Names that meet what the landing holds (see `_hostile_landing`), the key rules' edges, and arbitrary text.
SEGMENTS = st.one_of(
    st.sampled_from(
        [
            *("outdir", "filelink", "fifo", "real", "file.txt", "x.txt", "a", "..", ".", "", ".hidden", "x.tmp"),
            *("s" * 255, "s" * 256, "é" * 128, "\\", "a\x00b", "\ud800", "CON", " ", "a b+c%2F"),
        ]
    ),
    st.text(max_size=12),
)
KEYS = st.one_of(
    st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join),
    st.lists(SEGMENTS, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.text(max_size=40),
)
CONTENT = st.one_of(st.text(max_size=40), st.just("\ud800"))
BASE64 = st.one_of(st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()), st.text(max_size=20))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def landing_objects(draw: st.DrawFn) -> object:
    obj: dict[str, object] = {"key": draw(KEYS)}
    which = draw(st.sampled_from(["content", "content_base64", "both", "neither"]))
    if which in ("content", "both"):
        obj["content"] = draw(CONTENT)
    if which in ("content_base64", "both"):
        obj["content_base64"] = draw(BASE64)
    if draw(st.booleans()):
        obj[draw(st.sampled_from(["key", "content", "extra"]))] = draw(JSON_VALUES)  # a wrong type or a stray field
    return obj


# Bodies of the right shape, so that some land (and overwrite, and delete) while others are refused.
WELL_FORMED = st.fixed_dictionaries(
    {"objects": st.lists(st.fixed_dictionaries({"key": KEYS, "content": st.text(max_size=20)}), max_size=3)},
    optional={"deleted": st.lists(KEYS, max_size=2)},
)

BODIES = st.one_of(
    WELL_FORMED.map(lambda body: json.dumps(body).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "objects": st.lists(landing_objects(), max_size=4) | JSON_VALUES,
            "deleted": st.lists(KEYS, max_size=3) | JSON_VALUES,
        },
    ).map(lambda body: json.dumps(body).encode()),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=60),
)


def _hostile_landing(landing: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "secret.txt").write_text("outside")
    (landing / "outdir").symlink_to(outside, target_is_directory=True)
    (landing / "filelink").symlink_to(outside / "secret.txt")
    os.mkfifo(landing / "fifo")
    (landing / "real").mkdir()
    (landing / "real" / "x.txt").write_text("inside")
    (landing / "file.txt").write_text("inside")


def test_fuzzed_landing_bodies_get_a_2xx_or_a_4xx_and_nothing_lands_outside(api: ApiServer, tmp_path: Path) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    _hostile_landing(landing, outside)
    before_outside = _tree(outside)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    links = {name: os.readlink(landing / name) for name in ("outdir", "filelink")}
    seen: set[int] = set()

    @settings(
        derandomize=True,  # the same bodies on every run: a failure is reproducible
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(body=BODIES)
    # One body that must land and one that must not, whatever the generated ones turn out to be (under a loaded
    # suite, one run's 150 bodies were all refused, and the check below could not tell the paths were exercised).
    @example(body=json.dumps({"objects": [{"key": "fuzz/plain.txt", "content": "lands"}]}).encode())
    @example(body=json.dumps({"objects": [{"key": "outdir/escape.txt", "content": "refused"}]}).encode())
    def post(body: bytes) -> None:
        reply = client.post("/webhooks/landing", content=body, headers={**HOOK, "Content-Type": "application/json"})
        seen.add(reply.status_code)
        assert 200 <= reply.status_code < 500, f"{reply.status_code} for {body[:300]!r}: {reply.text[:300]}"
        assert _tree(outside) == before_outside, f"the outside folder changed after {body[:300]!r}"
        assert sorted(p.name for p in tmp_path.iterdir()) == siblings, f"a file appeared beside the landing: {body!r}"
        assert {name: os.readlink(landing / name) for name in links} == links

    with httpx.Client(base_url=api.url, timeout=30) as client:
        post()
    assert 202 in seen and 400 in seen, f"the fuzzer never landed or never got refused: {sorted(seen)}"
