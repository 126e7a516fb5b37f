"""POST /webhooks/landing lands objects through the same ledger as the bucket."""

from __future__ import annotations

import base64

from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import Flow

SECRET = "hook-secret"


def test_webhook_lands_objects_once(env, postgres_url, dagster_instance, tmp_path) -> None:
    from runtime_ops.demo.pdf import minimal_pdf

    env(database_url=postgres_url, landing=str(tmp_path / "landing"), RUNTIME_OPS_WEBHOOK_SECRET=SECRET)
    with ApiServer(load_settings()) as api:
        url = f"{api.url}/webhooks/landing"
        body = {
            "objects": [
                {"key": "crm/notes.md", "content": "# Notes\n\nCustomer asked about retry budgets."},
                {
                    "key": "crm/contract.pdf",
                    "content_base64": base64.b64encode(minimal_pdf(["Contract terms."])).decode(),
                },
            ]
        }
        assert web.post(url, json=body).status_code == 401
        assert web.post(url, json=body, headers={"X-Runtime-Ops-Token": "wrong"}).status_code == 401
        bad = {"objects": [{"key": "ok.txt", "content": "fine"}, {"key": "../escape.txt", "content": "no"}]}
        reply = web.post(url, json=bad, headers={"X-Runtime-Ops-Token": SECRET})
        assert reply.status_code == 400 and "escape" in reply.text
        assert not (tmp_path / "landing" / "ok.txt").exists()  # nothing half-landed
        both = {"objects": [{"key": "x.txt", "content": "a", "content_base64": "YQ=="}]}
        assert web.post(url, json=both, headers={"X-Runtime-Ops-Token": SECRET}).status_code == 400
        reply = web.post(url, json=body, headers={"X-Runtime-Ops-Token": SECRET})
        assert reply.status_code == 202, reply.text
        assert [o["key"] for o in reply.json()["landed"]] == ["crm/notes.md", "crm/contract.pdf"]

    flow = Flow(dagster_instance)
    [run] = flow.tick_and_run("landing_sensor")
    assert run.success
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert {d["key"] for d in store.documents.documents_by_status("ok")} == {"crm/notes.md", "crm/contract.pdf"}
    assert flow.tick("landing_sensor") == []
