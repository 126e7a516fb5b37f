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

from runtime_ops.settings import get_settings
from runtime_ops.store.approvals.audit import Audit
from runtime_ops.store.approvals.chain import Anchor, anchor_mac, key_id


class AnchorsUnavailable(Exception):
    """The anchors cannot be read or written; the message says where and why, in one line."""


class AnchorSink(Protocol):
    where: str

    def append(self, anchor: Anchor) -> None: ...

    def read(self) -> Iterator[Anchor]: ...


def _to_json(anchor: Anchor) -> str:
    heads = {c: list(h) for c, h in sorted(anchor.heads.items())}
    return json.dumps({"at": anchor.at, "heads": heads, "mac": anchor.mac, "kid": anchor.kid}, separators=(",", ":"))


def _from_json(text: str, where: str) -> Anchor:
    try:
        data = json.loads(text)
        heads = {str(c): (int(h[0]), str(h[1])) for c, h in data["heads"].items()}
        at = str(data["at"])
        if datetime.fromisoformat(at).tzinfo is None:
            raise ValueError("an anchor's time carries its offset")
        kid = data.get("kid")
        return Anchor(at, heads, str(data["mac"]), None if kid is None else str(kid))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise AnchorsUnavailable(f"{where} holds something that is not an anchor ({type(exc).__name__})") from exc


class FileSink:
    """One JSON line per anchor, appended (never rewritten) and fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def append(self, anchor: Anchor) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (_to_json(anchor) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise AnchorsUnavailable(f"cannot write the anchors to {self.path}: {exc.strerror or exc}") from exc

    def read(self) -> Iterator[Anchor]:
        """The anchors in order; none when the file does not exist (yet)."""
        try:
            with self.path.open(encoding="utf-8") as fh:
                lines = list(fh)
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise AnchorsUnavailable(f"cannot read the anchors in {self.path}: {why}") from exc
        for n, line in enumerate(lines, 1):
            if line.strip():
                yield _from_json(line, f"line {n} of {self.path}")


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
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(anchor), Body=_to_json(anchor).encode())
        except (BotoCoreError, ClientError) as exc:
            raise AnchorsUnavailable(f"cannot write the anchors to {self.where}: {exc}") from exc

    def read(self) -> Iterator[Anchor]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/".lstrip("/")):
                for obj in page.get("Contents", []):
                    body = self.client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
                    try:
                        text = body.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise AnchorsUnavailable(f"s3://{self.bucket}/{obj['Key']} is not an anchor") from exc
                    yield _from_json(text, f"s3://{self.bucket}/{obj['Key']}")
        except (BotoCoreError, ClientError) as exc:
            raise AnchorsUnavailable(f"cannot read the anchors in {self.where}: {exc}") from exc


def open_sink(where: str, *, endpoint_url: str | None = None) -> AnchorSink:
    if where.startswith("s3://"):
        import boto3

        return S3Sink(where, boto3.client("s3", endpoint_url=endpoint_url))
    return FileSink(Path(where))


def read_anchors(sink: AnchorSink) -> list[Anchor]:
    """Every anchor in `sink`, for checking the log against: none at all is an error like one that cannot be read,
    since deleting or emptying the anchors is how a log cut short would hide."""
    anchors = list(sink.read())
    if not anchors:
        raise AnchorsUnavailable(f"there are no anchors in {sink.where} (never written there, or deleted or emptied)")
    return anchors


def _anchored(sink: AnchorSink, kid: str) -> dict[str, tuple[int, str]] | None:
    """Each chain's newest head anchored under the key named `kid`; None when no anchor was taken under it."""
    heads: dict[str, tuple[int, str]] | None = None
    for anchor in sink.read():
        if anchor.kid is not None and anchor.kid != kid:
            continue
        heads = heads if heads is not None else {}
        for chain, head in anchor.heads.items():
            if head[0] >= heads.get(chain, (0, ""))[0]:
                heads[chain] = head
    return heads


# Per process and sink: the heads this process knows are anchored (the sensor's code server anchors every tick
# without reading the whole sink each time; another process's anchors only make one extra, harmless anchor).
_known: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}


def anchor_heads(audit_log: Audit, sink: AnchorSink, *, now: datetime | None = None) -> Anchor | None:
    """Anchor the heads of the chains that moved since their last anchor (None: nothing moved)."""
    return anchor_log(audit_log, sink, now=now)


def anchor_log(log: Audit, sink: AnchorSink, *, now: datetime | None = None) -> Anchor | None:
    """Anchor the heads that moved; a sink with no anchor under this key yet gets one even when none did (an
    empty log's), so that verify finds anchors from a new store's first sensor tick and a missing anchor is
    always a loss. Raises AnchorsUnavailable when the sink cannot be read or written."""
    key = log.key
    kid = key_id(key)
    known = _known.get((sink.where, kid))
    if known is None:
        known = _anchored(sink, kid)
        if known is not None:
            _known[(sink.where, kid)] = known
    changed = {c: h for c, h in log.heads().items() if h[0] > 0 and (known or {}).get(c) != h}
    if not changed and known is not None:
        return None
    at = (now or datetime.now(UTC)).isoformat()
    anchor = Anchor(at, changed, anchor_mac(changed, at, key), kid)
    sink.append(anchor)
    _known[(sink.where, kid)] = {**(known or {}), **changed}
    return anchor


def settings_sink() -> AnchorSink:
    """The sink RUNTIME_OPS_AUDIT_ANCHORS names (default: the append-only file in RUNTIME_OPS_HOME)."""
    settings = get_settings()
    return open_sink(settings.resolved_audit_anchors, endpoint_url=settings.aws_endpoint_url)
