"""The SQS queue S3 event notifications arrive on (event mode of the landing sensor): receive and delete.

Only the standard library is imported at module level; boto3 is imported when the first client is built, and
clients are cached per (endpoint, region) for the life of the process (a sensor tick builds its resources
afresh, a boto3 client costs ~100 ms to build, and boto3 clients are thread-safe).

Polling is short (``WaitTimeSeconds=0``): a tick asks for up to ``max_messages`` messages, ten per
``ReceiveMessage`` call, and stops at the first empty answer, so an idle tick costs one call. Messages stay
invisible to other consumers for ``VISIBILITY_TIMEOUT_SECONDS`` - longer than a sensor evaluation may take
(60 s by default) - and are deleted by the sensor only after what they announced is committed to the ledger;
a tick that dies before deleting them sees them again once the timeout has passed, and the ledger's
(key, version) uniqueness turns the redelivery into a no-op.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from runtime_ops.observability.tracing import instrument_boto3_client

__all__ = ["VISIBILITY_TIMEOUT_SECONDS", "EventQueue", "Message", "region_from_queue_url"]

log = logging.getLogger(__name__)

SETTING = "RUNTIME_OPS_SQS_QUEUE_URL"
VISIBILITY_TIMEOUT_SECONDS = 120  # read at call time (tests shorten it)
MAX_PER_CALL = 10  # SQS limit for ReceiveMessage and DeleteMessageBatch

_CLIENTS: dict[tuple[str | None, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Message:
    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 1  # ApproximateReceiveCount: > 1 means a redelivery


def region_from_queue_url(url: str) -> str | None:
    """``https://sqs.eu-west-1.amazonaws.com/123/q`` → ``eu-west-1`` (also the legacy ``eu-west-1.queue.…``)."""
    host = (urlsplit(url).hostname or "").lower()
    parts = host.split(".")
    if len(parts) >= 4 and parts[0] == "sqs" and "amazonaws" in parts:
        return parts[1]
    if len(parts) >= 4 and parts[1] == "queue" and "amazonaws" in parts:
        return parts[0]
    return None


def _client(endpoint_url: str | None, region: str | None) -> Any:
    import boto3  # ~1 s: only when event mode is actually used

    session = boto3.Session()
    region = region or session.region_name or "us-east-1"
    key = (endpoint_url, region)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = instrument_boto3_client(session.client("sqs", endpoint_url=endpoint_url, region_name=region))
            _CLIENTS[key] = client
        return client


class EventQueue:
    """One SQS queue: ``receive`` a bounded batch, ``delete`` by receipt handle."""

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        visibility_timeout: int | None = None,
        client: Any | None = None,
    ) -> None:
        if not url or not url.startswith(("http://", "https://")):
            raise ValueError(f"{SETTING}={url!r} is not an SQS queue URL (https://sqs.<region>.amazonaws.com/…)")
        self.url = url
        self.endpoint_url = endpoint_url
        self._visibility_timeout = visibility_timeout
        self._client = client

    def __repr__(self) -> str:
        return f"EventQueue({self.url!r}, endpoint_url={self.endpoint_url!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            # With an endpoint override (moto, LocalStack) the region in the URL means nothing: use the usual chain.
            region = None if self.endpoint_url else region_from_queue_url(self.url)
            self._client = _client(self.endpoint_url, region)
        return self._client

    @property
    def visibility_timeout(self) -> int:
        return int(self._visibility_timeout if self._visibility_timeout is not None else VISIBILITY_TIMEOUT_SECONDS)

    def receive(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` messages (ten per call, no long polling), stopping at the first empty answer.

        A message SQS hands out twice in one poll (at-least-once) is returned once, with its latest receipt.
        """
        out: dict[str, Message] = {}
        calls = 0
        max_calls = -(-max(max_messages, 0) // MAX_PER_CALL) * 2 + 1  # duplicates can make answers short
        while len(out) < max_messages and calls < max_calls:
            calls += 1
            resp = self.client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=min(MAX_PER_CALL, max_messages - len(out)),
                WaitTimeSeconds=0,
                VisibilityTimeout=self.visibility_timeout,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
            batch = resp.get("Messages") or []
            if not batch:
                break
            for m in batch:
                count = m.get("Attributes", {}).get("ApproximateReceiveCount", "1")
                out[m["MessageId"]] = Message(
                    message_id=m["MessageId"],
                    receipt_handle=m["ReceiptHandle"],
                    body=m.get("Body") or "",
                    receive_count=int(count) if str(count).isdigit() else 1,
                )
        return list(out.values())

    def delete(self, receipts: Sequence[str]) -> list[str]:
        """Delete by receipt handle, ten per ``DeleteMessageBatch``. Returns the receipts SQS refused (logged):
        those messages come back after the visibility timeout and are recognised as already recorded."""
        failed: list[str] = []
        receipts = list(dict.fromkeys(receipts))
        for start in range(0, len(receipts), MAX_PER_CALL):
            chunk = receipts[start : start + MAX_PER_CALL]
            resp = self.client.delete_message_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)],
            )
            for entry in resp.get("Failed") or []:
                try:
                    failed.append(chunk[int(entry.get("Id", -1))])
                except (ValueError, IndexError):
                    continue
                log.warning(
                    "SQS refused to delete a message (%s: %s); it will be redelivered and skipped as recorded",
                    entry.get("Code"), entry.get("Message"),
                )  # fmt: skip
        return failed

    def depth(self) -> dict[str, int]:
        """Approximate visible and in-flight message counts (for status output and tests)."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attrs = self.client.get_queue_attributes(QueueUrl=self.url, AttributeNames=names).get("Attributes", {})
        return {"visible": int(attrs.get(names[0], 0)), "in_flight": int(attrs.get(names[1], 0))}
