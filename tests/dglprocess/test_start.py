"""dglprocess.start without DGL: the listening sockets it reads, the machines of an ip_config,
the trainer's wait for its machine's servers and the server's shortened wait. Each check has
its twin that shows it can fail (a bound socket that does not listen, a port nobody serves, an
address that is not this machine's, DGL's other sleep). With DGL, in a server and a trainer:
tests/examples/test_dglprocess.py."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dglprocess import start


@pytest.fixture
def bound() -> Iterator[socket.socket]:
    """A TCP socket bound to 127.0.0.1 on a free port, not listening yet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s


def address(s: socket.socket) -> tuple[str, int]:
    host, port = s.getsockname()[:2]
    return str(host), int(port)


def test_a_socket_is_seen_listening_only_once_it_listens(bound: socket.socket) -> None:
    assert address(bound) not in start.listening()  # bound is not listening
    bound.listen()
    assert address(bound) in start.listening()


def test_an_ipv6_listener_is_read_with_its_address() -> None:
    if not socket.has_ipv6 or not start.is_local("::1"):
        pytest.fail("this machine has no ::1 (the IPv6 table cannot be read here)")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        s.listen()
        assert ("::1", s.getsockname()[1]) in start.listening()


def test_servers_of_an_ip_config_are_each_machines_ports(tmp_path: Path) -> None:
    config = tmp_path / "ip_config.txt"
    config.write_text("10.0.0.1 30050\n10.0.0.2 30050\n\n")
    assert start.servers_of(str(config), 2) == [
        {("10.0.0.1", 30050), ("10.0.0.1", 30051)},
        {("10.0.0.2", 30050), ("10.0.0.2", 30051)},
    ]


def test_only_this_machines_addresses_are_local() -> None:
    assert start.is_local("127.0.0.1")
    assert not start.is_local("192.0.2.1")  # TEST-NET-1: nobody's


def test_a_trainer_waits_for_its_machines_servers_to_listen(bound: socket.socket) -> None:
    mine = {address(bound)}
    assert not start.wait_for_local_servers([mine], timeout=0.3)  # never listens: the bound
    bound.listen()
    assert start.wait_for_local_servers([mine], timeout=30)


def test_a_trainer_whose_servers_are_elsewhere_does_not_wait() -> None:
    looked: list[int] = []

    def look() -> set[tuple[str, int]]:
        looked.append(1)
        return set()

    elsewhere = [{("192.0.2.1", 30050)}]
    assert not start.wait_for_local_servers(elsewhere, timeout=30, look=look)
    assert looked == []  # not one look: nothing here to wait for
    here = [{("127.0.0.1", 1)}]  # its twin: a local machine is looked at until the bound
    assert not start.wait_for_local_servers(here, timeout=0.2, look=look)
    assert looked


class FakeTime:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def monotonic(self) -> float:
        return 42.0


def test_the_servers_wait_for_receivers_is_shortened_and_nothing_else() -> None:
    fake = FakeTime()
    clock: Any = start._ShortWait(fake)
    clock.sleep(start.DGL_RECEIVERS_WAIT)  # rpc_server's "wait for clients' receivers ready"
    clock.sleep(1)  # its retry of a refused connection: DGL's own
    assert fake.slept == [start.RECEIVERS_WAIT, 1]
    assert clock.monotonic() == 42.0  # every other name is the module's


def test_the_switch_turns_it_off() -> None:
    assert start.enabled({})
    assert start.enabled({start.SWITCH: "1"})
    assert not start.enabled({start.SWITCH: "0"})
