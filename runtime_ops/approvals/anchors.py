"""Anchoring the audit chains' heads where the database cannot rewrite them.

`anchor_heads` copies the head (seq, MAC) of every chain that changed since the last anchor, MACed under the
audit key, to an anchor sink: an append-only local file by default (`$RUNTIME_OPS_HOME/audit_anchors.jsonl`,
opened with O_APPEND and fsynced), or one object per anchor under `s3://bucket/prefix` (on a bucket with Object
Lock in compliance mode, not even its owner can delete or overwrite them). The approvals sensor anchors on
every tick; `runtime-ops audit anchor` does it by hand. `runtime-ops audit verify` reads the anchors back: a
record the log lost, or a head moved back, since an anchor saw it is named.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from runtime_ops.store import StateStore
from runtime_ops.store.audit import Audit
from runtime_ops.store.chain import Anchor, anchor_mac, key_id


class AnchorSink(Protocol):
    where: str

    def append(self, anchor: Anchor) -> None: ...

    def read(self) -> Iterator[Anchor]: ...


def _to_json(anchor: Anchor) -> str:
    heads = {c: list(h) for c, h in sorted(anchor.heads.items())}
    return json.dumps({"at": anchor.at, "heads": heads, "mac": anchor.mac, "kid": anchor.kid}, separators=(",", ":"))


def _from_json(text: str) -> Anchor:
    data = json.loads(text)
    heads = {c: (int(h[0]), str(h[1])) for c, h in data["heads"].items()}
    return Anchor(str(data["at"]), heads, str(data["mac"]), data.get("kid"))


class FileSink:
    """One JSON line per anchor, appended (never rewritten) and fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def append(self, anchor: Anchor) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (_to_json(anchor) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> Iterator[Anchor]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield _from_json(line)


class S3Sink:
    """One object per anchor, `<prefix>/<UTC time>-<mac prefix>.json`: listing order is time order."""

    def __init__(self, uri: str, client: Any) -> None:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        self.bucket, self.prefix, self.client = bucket, prefix.strip("/"), client
        self.where = uri

    def _key(self, anchor: Anchor) -> str:
        stamp = datetime.fromisoformat(anchor.at).strftime("%Y%m%dT%H%M%S%fZ")
        return f"{self.prefix}/{stamp}-{anchor.mac[:12]}.json".lstrip("/")

    def append(self, anchor: Anchor) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(anchor), Body=_to_json(anchor).encode())

    def read(self) -> Iterator[Anchor]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/".lstrip("/")):
            for obj in page.get("Contents", []):
                body = self.client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
                yield _from_json(body.decode("utf-8"))


def open_sink(where: str, *, endpoint_url: str | None = None) -> AnchorSink:
    if where.startswith("s3://"):
        import boto3

        return S3Sink(where, boto3.client("s3", endpoint_url=endpoint_url))
    return FileSink(Path(where))


def anchored_heads(sink: AnchorSink, kid: str) -> dict[str, tuple[int, str]]:
    """Each chain's newest head anchored under the key named `kid`."""
    heads: dict[str, tuple[int, str]] = {}
    for anchor in sink.read():
        if anchor.kid is not None and anchor.kid != kid:
            continue
        for chain, head in anchor.heads.items():
            if head[0] >= heads.get(chain, (0, ""))[0]:
                heads[chain] = head
    return heads


# Per process and sink: the heads this process knows are anchored (the sensor's code server anchors every tick
# without reading the whole sink each time; another process's anchors only make one extra, harmless anchor).
_known: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}


def anchor_heads(store: StateStore, sink: AnchorSink, *, now: datetime | None = None) -> Anchor | None:
    """Anchor the heads of the chains that moved since their last anchor (None: nothing moved)."""
    return anchor_log(store.audit_log, sink, now=now)


def anchor_log(log: Audit, sink: AnchorSink, *, now: datetime | None = None) -> Anchor | None:
    key = log.key
    kid = key_id(key)
    known = _known.get((sink.where, kid))
    if known is None:
        known = _known[(sink.where, kid)] = anchored_heads(sink, kid)
    changed = {c: h for c, h in log.heads().items() if h[0] > 0 and known.get(c) != h}
    if not changed:
        return None
    at = (now or datetime.now(UTC)).isoformat()
    anchor = Anchor(at, changed, anchor_mac(changed, at, key), kid)
    sink.append(anchor)
    known.update(changed)
    return anchor


def settings_sink() -> AnchorSink:
    """The sink RUNTIME_OPS_AUDIT_ANCHORS names (default: the append-only file in RUNTIME_OPS_HOME)."""
    from runtime_ops.settings import get_settings

    settings = get_settings()
    return open_sink(settings.resolved_audit_anchors, endpoint_url=settings.aws_endpoint_url)
