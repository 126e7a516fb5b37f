"""What the routes depend on, as FastAPI dependencies.

`create_app` builds one `OpsContext` (settings, state store, clock, link secret, Slack) and keeps it on
`app.state.ops`; each dependency hands a route the piece it needs. The dependencies are `async def` on
purpose: FastAPI runs a sync dependency in its thread pool, a hop that would cost every Slack click time for
what is an attribute read. Tests can replace any of them with `app.dependency_overrides`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from runtime_ops.api.refusals import Refusals
from runtime_ops.approvals.announce import Announcer
from runtime_ops.approvals.slack.signing import SlackSignature
from runtime_ops.settings import Settings
from runtime_ops.store import StateStore

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class OpsContext:
    settings: Settings
    store: StateStore
    now: Clock
    link_secret: str
    announcer: Announcer  # posts/updates approval messages (Slack) or logs signed links
    slack_signature: SlackSignature | None  # None: SLACK_SIGNING_SECRET unset, Slack interactivity is off
    refusals: Refusals  # unauthenticated failures: audited in aggregate, rate-limited per client


def ops_context(request: Request) -> OpsContext:
    ops: OpsContext = request.app.state.ops
    return ops


async def get_ops(request: Request) -> OpsContext:
    return ops_context(request)


async def get_settings(request: Request) -> Settings:
    return ops_context(request).settings


async def get_store(request: Request) -> StateStore:
    return ops_context(request).store


async def get_clock(request: Request) -> Clock:
    return ops_context(request).now


async def get_link_secret(request: Request) -> str:
    return ops_context(request).link_secret


async def get_announcer(request: Request) -> Announcer:
    return ops_context(request).announcer


async def get_refusals(request: Request) -> Refusals:
    return ops_context(request).refusals


async def get_slack_signature(request: Request) -> SlackSignature | None:
    return ops_context(request).slack_signature


# The whole context in one dependency, for the Slack click path: FastAPI resolves each dependency per request
# (~20 µs apiece), and that route needs four of them.
OpsDep = Annotated[OpsContext, Depends(get_ops)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[StateStore, Depends(get_store)]
ClockDep = Annotated[Clock, Depends(get_clock)]
LinkSecretDep = Annotated[str, Depends(get_link_secret)]
AnnouncerDep = Annotated[Announcer, Depends(get_announcer)]
RefusalsDep = Annotated[Refusals, Depends(get_refusals)]
SlackSignatureDep = Annotated[SlackSignature | None, Depends(get_slack_signature)]
