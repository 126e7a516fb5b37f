"""`POST /alerts/alertmanager` against every edge of its schema (real PostgreSQL): out-of-range times, text the
store cannot hold, a `pipeline` label that names no pipeline, and a seeded, bounded hypothesis fuzz of the whole
payload. Every body gets a 2xx or a 4xx naming the field, never a 5xx (Alertmanager retries those for ever), and
a refused body records nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from runtime_ops.alerts.webhook import parse_payload
from runtime_ops.api.app import create_app
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t

TOKEN = "alert-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
def inbox(env: Any, postgres_url: str) -> Iterator[tuple[TestClient, StateStore]]:
    env(database_url=postgres_url, RUNTIME_OPS_ALERT_TOKEN=TOKEN)
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
    with TestClient(create_app(get_settings()), raise_server_exceptions=False) as client:
        yield client, store
    store.engine.dispose()


def _payload(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {"version": "4", "groupKey": "{}:{}", "status": "firing", "receiver": "runtime_ops", "alerts": list(alerts)}


def _alert(**fields: Any) -> dict[str, Any]:
    base = {
        "status": "firing",
        "labels": {"alertname": "RetrievalQualityLow"},
        "annotations": {},
        "startsAt": "2026-12-01T10:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": "0123abcd",
    }
    return {**base, **fields}


def _rows(store: StateStore) -> int:
    with store.tx() as conn:
        return int(conn.execute(select(func.count()).select_from(t.alerts)).scalar_one())


@pytest.mark.parametrize(
    ("alert", "problem"),
    [
        (_alert(startsAt="9999-12-31T23:59:59-01:00"), "alerts.0.startsAt"),
        (_alert(endsAt="9999-12-31T23:30:00-02:00"), "alerts.0.endsAt"),
        (_alert(labels={"alertname": "Quality\u0000Low"}), "alerts.0.labels.alertname"),
        (_alert(labels={"alertname": "\ud800"}), "alerts.0.labels.alertname"),
        (_alert(generatorURL="http://prometheus/\u0000"), "alerts.0.generatorURL"),
        (_alert(labels={"alertname": "A", "pipeline": "p" * 100}), "alerts.0.labels"),
        ({"groupKey": "{}:{\u0000}"}, "groupKey"),
        ({"receiver": "team-\udfff"}, "receiver"),
    ],
)
def test_values_the_store_cannot_hold_are_a_400_naming_the_field(
    inbox: tuple[TestClient, StateStore], alert: dict[str, Any], problem: str
) -> None:
    client, store = inbox
    if "status" in alert:  # a bad alert after a valid one: nothing of the payload is recorded
        body, where = _payload(_alert(fingerprint="ffff0000"), alert), problem.replace(".0.", ".1.")
    else:  # a bad field of the payload itself
        body, where = {**_payload(_alert()), **alert}, problem
    reply = client.post("/alerts/alertmanager", content=json.dumps(body), headers=AUTH)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"].startswith(f"malformed Alertmanager webhook: {where}: "), reply.json()
    assert _rows(store) == 0


# ---------------------------------------------------------------------------------------------- the fuzz

_HOSTILE_TEXT = st.sampled_from(["", "\u0000", "\ud800", "a\udfffb", "\u202e", "x" * 5000, "</script>", "😀"])
_TEXT = st.text(st.characters(exclude_characters="\x00"), max_size=40)
# Any code point, lone surrogates and NUL included.
_ANY_TEXT = st.one_of(_HOSTILE_TEXT, st.text(st.characters(codec=None), max_size=10))
_OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(lambda m: timedelta(minutes=m))
_EDGE_TIMES = st.sampled_from(
    [
        "9999-12-31T23:59:59-01:00",
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+00:01",
        "0001-01-02T00:00:00+23:59",
        "2026-02-30T00:00:00Z",
        "2026-12-01T10:00:00",  # no offset
        "2026-12-01T10:00:00+24:00",
        "not a time",
    ]
)
_ISO_TIMES = st.builds(
    lambda d, off: d.replace(tzinfo=timezone(off)).isoformat(),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    _OFFSETS,
)
_TIMES = st.one_of(_ISO_TIMES, _ISO_TIMES, _ISO_TIMES, _EDGE_TIMES, st.integers(min_value=-(2**70), max_value=2**70))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT | _ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)
_PIPELINES = st.one_of(st.sampled_from(["demo", "support", "support_2"]), st.sampled_from(["Demo", "p" * 41]), _TEXT)
_LABELS = st.one_of(
    st.dictionaries(_TEXT, _TEXT, max_size=4),
    st.fixed_dictionaries({"alertname": _TEXT}, optional={"pipeline": _PIPELINES}),
)
_FINGERPRINTS = st.one_of(st.from_regex(r"\A[0-9a-f]{1,16}\Z"), st.from_regex(r"\A[0-9a-f]{1,16}\Z"), _TEXT)
_TEXT_MAPS = st.dictionaries(_TEXT, _TEXT, max_size=3)

# Well-typed payloads whose values are hostile (odd text, edge times, odd label sets)...
_ALERTS = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["firing", "resolved"]),
        "labels": _LABELS,
        "startsAt": _TIMES,
        "fingerprint": _FINGERPRINTS,
    },
    optional={"annotations": _TEXT_MAPS, "endsAt": _TIMES, "generatorURL": _TEXT},
)
_TYPED = st.fixed_dictionaries(
    {
        "version": st.just("4"),
        "groupKey": _TEXT,
        "status": st.sampled_from(["firing", "resolved"]),
        "receiver": _TEXT,
        "alerts": st.lists(_ALERTS, min_size=1, max_size=4) | st.just([]),
    },
    optional={
        "truncatedAlerts": st.integers(min_value=-1, max_value=2**64),
        "groupLabels": _TEXT_MAPS,
        "commonLabels": _TEXT_MAPS,
        "commonAnnotations": _TEXT_MAPS,
        "externalURL": _TEXT,
    },
)


@st.composite
def _payloads(draw: st.DrawFn) -> dict[str, Any]:
    """...and two in three have one thing changed: a field of the payload, of an alert or of its labels or
    annotations replaced by any text or any JSON value, removed, or a label added with any text as its name."""
    payload: dict[str, Any] = draw(_TYPED)
    change = draw(st.sampled_from(["none", "replace", "remove", "add"]))
    if change == "none":
        return payload
    alerts: list[dict[str, Any]] = payload["alerts"]
    maps = [a[k] for a in alerts for k in ("labels", "annotations") if k in a]
    targets: list[dict[str, Any]] = [payload, *alerts, *maps]
    target = draw(st.sampled_from(targets))
    if change == "add" or not target:
        target[draw(_ANY_TEXT)] = draw(_ANY_TEXT)
        return payload
    field = draw(st.sampled_from(sorted(target)))
    if change == "remove":
        del target[field]
    else:
        target[field] = draw(st.one_of(_ANY_TEXT, _JSON))
    return payload


def _keys(payload: dict[str, Any]) -> set[tuple[str, datetime]]:
    """The (fingerprint, startsAt) of each alert of an accepted payload, as the inbox keys them."""
    return {(a.fingerprint, a.starts_at) for a in parse_payload(json.dumps(payload)).alerts}


def _stored_keys(store: StateStore) -> set[tuple[str, datetime]]:
    with store.tx() as conn:
        rows = conn.execute(select(t.alerts.c.fingerprint, t.alerts.c.starts_at))
        return {(r.fingerprint, r.starts_at) for r in rows}


def test_fuzzed_webhooks_get_a_2xx_or_a_4xx_and_a_refused_one_records_nothing(
    inbox: tuple[TestClient, StateStore],
) -> None:
    client, store = inbox

    # derandomize: the same 200 examples on every run (no example database), so a failure reproduces as is.
    @settings(
        max_examples=200,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(payload=_payloads())
    def one(payload: dict[str, Any]) -> None:
        before = _stored_keys(store)
        reply = client.post("/alerts/alertmanager", content=json.dumps(payload), headers=AUTH)
        assert reply.status_code in (200, 400), f"{reply.status_code} {reply.text[:500]} for {payload!r:.2000}"
        after = _stored_keys(store)
        if reply.status_code == 400:
            assert reply.json()["error"].startswith("malformed Alertmanager webhook: ")
            assert after == before, "a refused webhook recorded alerts"
        else:
            assert reply.json()["alerts"] == len(payload["alerts"])
            sent = _keys(payload)
            assert sent <= after and after - before <= sent

    one()
