"""Tickets as they land: JSONL files (one ``{"id", "text", "label"?}`` object a line) or text files (one ticket each,
its id the key without the extension). Pure: bytes in, tickets and the reasons for refused lines out.

A line that cannot be a ticket (not JSON, no id or text, a label outside the declared set) is refused with a reason
naming the file, the line and the fix; the other tickets of the file still count. An id seen twice keeps its first
occurrence (in key order) and refuses the others, so one ticket is never labelled twice under one id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TEXT_SUFFIXES = (".txt",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")
MAX_ID_CHARS = 255
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class Ticket:
    id: str
    text: str
    label: str | None = None  # the reviewed label, on the labelled sample only
    source: str = ""  # "<key>:<line>"


@dataclass(frozen=True)
class Refused:
    source: str  # "<key>:<line>" (or "<key>")
    reason: str


def is_ticket_key(key: str) -> bool:
    return key.endswith(TEXT_SUFFIXES + JSONL_SUFFIXES)


def parse_ticket_file(key: str, data: bytes, labels: Sequence[str]) -> tuple[list[Ticket], list[Refused]]:
    """The tickets of one landed object and the lines refused, with their reasons."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [Refused(key, f"not UTF-8 text (byte {exc.start}); save the file as UTF-8")]
    if key.endswith(TEXT_SUFFIXES):
        stem = key.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        ticket, problem = _ticket({"id": stem, "text": text}, labels)
        return ([ticket], []) if ticket else ([], [Refused(key, problem)])
    tickets: list[Ticket] = []
    refused: list[Refused] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{key}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            refused.append(Refused(source, f"not a JSON object ({exc.msg}); write one JSON object per line"))
            continue
        ticket, problem = _ticket(record, labels, source)
        if ticket is None:
            refused.append(Refused(source, problem))
        else:
            tickets.append(ticket)
    return tickets, refused


def _ticket(record: object, labels: Sequence[str], source: str = "") -> tuple[Ticket | None, str]:
    if not isinstance(record, dict):
        return None, 'not a JSON object; write {"id": ..., "text": ...} per line'
    ticket_id, text, label = record.get("id"), record.get("text"), record.get("label")
    if isinstance(ticket_id, int) and not isinstance(ticket_id, bool):
        ticket_id = str(ticket_id)
    if not isinstance(ticket_id, str) or not ticket_id.strip() or len(ticket_id) > MAX_ID_CHARS:
        return None, f'"id" must be a non-empty string of at most {MAX_ID_CHARS} characters'
    if not isinstance(text, str) or not text.strip():
        return None, '"text" must be a non-empty string'
    if len(text) > MAX_TEXT_CHARS:
        return None, f'"text" is {len(text)} characters long (at most {MAX_TEXT_CHARS}); shorten the ticket'
    if label is not None and label not in labels:
        return None, f'"label" {label!r} is not one of the declared labels ({", ".join(labels)})'
    return Ticket(ticket_id.strip(), text.strip(), label, source), ""


def dedupe(tickets: Iterable[Ticket]) -> tuple[list[Ticket], list[Refused]]:
    """The first ticket of each id (in the order given: key order), and the later ones refused."""
    kept: dict[str, Ticket] = {}
    refused: list[Refused] = []
    for ticket in tickets:
        first = kept.setdefault(ticket.id, ticket)
        if first is not ticket:
            refused.append(Refused(ticket.source, f"ticket id {ticket.id!r} is already used at {first.source}"))
    return list(kept.values()), refused
