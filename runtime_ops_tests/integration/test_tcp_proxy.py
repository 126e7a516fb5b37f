"""The soak's TCP proxy in front of a real PostgreSQL and a real Redis: it passes, delays, resets and black-holes
connections as its fault says, and heals (runtime_ops_tests/support/tcp_proxy.py)."""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest
import redis

from runtime_ops_tests.support.servers import HOST, PostgresServer, RedisServer
from runtime_ops_tests.support.tcp_proxy import TcpProxy


class _Pg:
    """A psycopg2 connection with autocommit and a one-call query."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg2.connect(url, connect_timeout=5)
        self.conn.autocommit = True

    def one(self, sql: str) -> tuple:
        with self.conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
        assert row is not None, sql
        return row

    def close(self) -> None:
        self.conn.close()


def _pg(server: PostgresServer, proxy: TcpProxy, database: str) -> _Pg:
    return _Pg(database.replace(f":{server.port}/", f":{proxy.port}/"))


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database (a name of its own: nothing else connects to it)."""
    return postgres_server.create_database()


def test_postgres_through_the_proxy_passes_delays_and_is_reset(postgres_server: PostgresServer, database: str) -> None:
    with TcpProxy(postgres_server.port) as proxy:
        conn = _pg(postgres_server, proxy, database)
        assert conn.one("select 41 + 1") == (42,)

        proxy.delay(0.25)
        t0 = time.monotonic()
        conn.one("select 1")
        assert time.monotonic() - t0 >= 0.5  # the query and its answer each waited

        proxy.heal()
        proxy.reset()
        with pytest.raises(psycopg2.OperationalError):
            conn.one("select 1")
        with pytest.raises(psycopg2.OperationalError):
            _pg(postgres_server, proxy, database)  # new connections are reset too while the fault lasts
        assert proxy.resets >= 2

        proxy.heal()
        again = _pg(postgres_server, proxy, database)
        assert again.one("select 2") == (2,)
        again.close()


def test_a_black_hole_holds_traffic_until_it_heals(postgres_server: PostgresServer, database: str) -> None:
    with TcpProxy(postgres_server.port) as proxy:
        conn = _pg(postgres_server, proxy, database)
        proxy.blackhole()
        answers: list[object] = []
        worker = threading.Thread(target=lambda: answers.append(conn.one("select 7")))
        worker.start()
        worker.join(1.5)
        assert worker.is_alive() and not answers  # no answer, and no error either: a partition, not a refusal
        with pytest.raises(psycopg2.OperationalError):
            _pg(postgres_server, proxy, database).close()  # connect_timeout=5: a new client gives up
        proxy.heal()
        worker.join(10)
        assert answers == [(7,)]  # what was held went through


def test_redis_through_the_proxy_is_reset_then_answers_again(redis_server: RedisServer) -> None:
    with TcpProxy(redis_server.port) as proxy:
        client = redis.Redis(host=HOST, port=proxy.port, socket_timeout=2, retry_on_timeout=False)
        client.set("soak:k", "v")
        proxy.reset()
        with pytest.raises(redis.ConnectionError):
            redis.Redis(host=HOST, port=proxy.port, socket_timeout=2).ping()
        proxy.heal()
        assert client.get("soak:k") == b"v"  # redis-py reconnects once the proxy passes again
